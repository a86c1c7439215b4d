//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
)

// TestListAndStatus checks the table, the detailed status and -o json|yaml
// on two plugins in a namespace of their own, one with a status written by
// hand as the operator would write it, one never reconciled.
func TestListAndStatus(t *testing.T) {
	const ns = "cli-list"
	k := newKube(t)
	ctx := context.Background()
	if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	im := newImages(t)
	v1 := im.signed(t, "plugins/fx", fxV1)
	v2 := im.signed(t, "plugins/fx", fxV2)
	config := tempFile(t, "config.yaml", fxConfig)
	for _, name := range []string{"ls-b", "ls-a"} {
		expect(t, openfief(t, k, runOpts{}, "-n", ns, "plugin", "install", name, "--image", v1.String(), "--config", config, "--signers", im.signers),
			ExitOK, "Warning: the operator watches only namespace openfief")
	}
	expect(t, openfief(t, k, runOpts{}, "-n", ns, "plugin", "approve", "ls-a", "--yes"), ExitOK)
	expect(t, openfief(t, k, runOpts{}, "-n", ns, "plugin", "upgrade", "ls-a", "--image", v2.String(), "--signers", im.signers), ExitOK)

	// The operator's status of ls-a: the previous version runs while the
	// upgrade waits for static.nbp.pl:8443.
	var a v1alpha1.Plugin
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ls-a"}, &a); err != nil {
		t.Fatal(err)
	}
	created := a.CreationTimestamp.Time
	at := metav1.NewTime(created)
	a.Status = v1alpha1.PluginStatus{
		ObservedGeneration: a.Generation,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionApprovalRequired, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPermissionsPending, Message: "egress: static.nbp.pl:8443", LastTransitionTime: at},
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunningPreviousVersion, Message: "the previous version runs;\nthe current one awaits approval", LastTransitionTime: at},
			{Type: v1alpha1.ConditionSignatureVerified, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedByTrustedSigner, Message: "signed by trusted signer owner; not a verified catalog plugin", LastTransitionTime: at},
		},
		Deployed:        &v1alpha1.DeployedVersion{Image: v1.String(), Manifest: apiconv.ManifestToAPI(fxV1), Signer: "owner", Trust: v1alpha1.ReasonSignedByTrustedSigner, VerifiedAt: &at},
		PendingApproval: &v1alpha1.PendingApproval{Egress: []string{"static.nbp.pl:8443"}},
		Effective: &v1alpha1.EffectivePermissions{
			Capabilities: []v1alpha1.Capability{"connector"},
			Egress:       []string{"api.nbp.pl:443"},
			Secrets:      []v1alpha1.GrantedSecret{{Name: "fx-token", SecretName: "fx-token", MountPath: "/etc/fx"}},
			DataTiers:    []string{"rates"},
		},
	}
	if err := k.c.Status().Update(ctx, &a); err != nil {
		t.Fatal(err)
	}
	now := runOpts{now: created.Add(3 * time.Hour)}

	t.Run("table", func(t *testing.T) {
		r := openfief(t, k, now, "-n", ns, "plugin", "list")
		expect(t, r, ExitOK)
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
			rows = append(rows, strings.Fields(line))
		}
		want := [][]string{
			{"NAME", "READY", "REASON", "SIGNATURE", "APPROVAL", "IMAGE", "AGE"},
			{"ls-a", "True", "RunningPreviousVersion", "SignedByTrustedSigner", "PermissionsPending", shortImage(v2.String()), "3h"},
			{"ls-b", "-", "-", "-", "-", shortImage(v1.String()), "3h"},
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("table (-want +got):\n%s\n%s", diff, r.out)
		}
		if again := openfief(t, k, now, "-n", ns, "plugin", "list"); again.out != r.out {
			t.Errorf("the table changed between two runs:\n%s\n%s", r.out, again.out)
		}
	})
	t.Run("empty namespace", func(t *testing.T) {
		r := openfief(t, k, now, "-n", "default", "plugin", "list")
		expect(t, r, ExitOK, "No plugins found in namespace default.")
	})
	t.Run("json", func(t *testing.T) {
		r := openfief(t, k, now, "-n", ns, "plugin", "list", "-o", "json")
		expect(t, r, ExitOK)
		var list v1alpha1.PluginList
		if err := json.Unmarshal([]byte(r.out), &list); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
		checkList(t, list)
	})
	t.Run("yaml", func(t *testing.T) {
		r := openfief(t, k, now, "-n", ns, "plugin", "list", "-o", "yaml")
		expect(t, r, ExitOK, "kind: PluginList")
		var list v1alpha1.PluginList
		if err := yaml.Unmarshal([]byte(r.out), &list); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
		checkList(t, list)
	})
	t.Run("status", func(t *testing.T) {
		r := openfief(t, k, now, "-n", ns, "plugin", "status", "ls-a")
		expect(t, r, ExitOK,
			"Image:        "+v2.String(),
			"  Image:      "+v1.String(),
			"  Signer:     owner (SignedByTrustedSigner)",
			"(a previous version: the current spec does not run yet)",
			"Egress:        api.nbp.pl:443, static.nbp.pl:8443",
			"Granted (PluginGrant ls-a):",
			// The approve command names the same kubeconfig and namespace.
			"Pending (approve with: openfief plugin approve ls-a --kubeconfig "+shellQuote(k.kubeconfig)+" -n "+ns+"):\n  Egress:        static.nbp.pl:8443\n",
			"Effective (what runs holds):",
			"fx-token (Secret fx-token) at /etc/fx",
			"the previous version runs; the current one awaits approval",
		)
		lines := strings.Split(r.out, "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Conditions:") })
		if i < 0 || len(lines) < i+5 || !strings.Contains(lines[i+2], "Ready") || !strings.Contains(lines[i+3], "SignatureVerified") || !strings.Contains(lines[i+4], "ApprovalRequired") {
			t.Errorf("conditions not in the order Ready, SignatureVerified, ApprovalRequired:\n%s", r.out)
		}
	})
	t.Run("status older than the spec", func(t *testing.T) {
		var b v1alpha1.Plugin
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ls-b"}, &b); err != nil {
			t.Fatal(err)
		}
		b.Status.ObservedGeneration = b.Generation
		if err := k.c.Status().Update(ctx, &b); err != nil {
			t.Fatal(err)
		}
		b.Spec.Config = configJSON([]byte(`{"currency":"EUR"}`))
		if err := k.c.Update(ctx, &b); err != nil {
			t.Fatal(err)
		}
		r := openfief(t, k, now, "-n", ns, "plugin", "status", "ls-b")
		expect(t, r, ExitOK, fmt.Sprintf("the status describes generation %d; the spec is at %d", b.Generation-1, b.Generation))
	})
	t.Run("status of a plugin never reconciled", func(t *testing.T) {
		r := openfief(t, k, now, "-n", ns, "plugin", "status", "ls-b")
		expect(t, r, ExitOK, "Deployed:     nothing runs", "Granted:      nothing (no PluginGrant ls-b)", "none yet: the operator has not reconciled")
	})
	t.Run("status json", func(t *testing.T) {
		r := openfief(t, k, now, "-n", ns, "plugin", "status", "ls-a", "-o", "json")
		expect(t, r, ExitOK, `"kind": "Plugin"`)
		var p v1alpha1.Plugin
		if err := json.Unmarshal([]byte(r.out), &p); err != nil || p.Name != "ls-a" || p.Status.Deployed == nil {
			t.Errorf("status -o json: %v\n%s", err, r.out)
		}
	})
	t.Run("status of an unknown plugin", func(t *testing.T) {
		r := openfief(t, k, now, "-n", ns, "plugin", "status", "ls-nobody")
		expect(t, r, ExitNotFound, `plugin "ls-nobody" not found in namespace "cli-list"`)
	})
}

func checkList(t *testing.T, list v1alpha1.PluginList) {
	t.Helper()
	if list.Kind != "PluginList" || list.APIVersion != "openfief.io/v1alpha1" {
		t.Errorf("list type %s %s", list.APIVersion, list.Kind)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
		if p.Kind != "Plugin" || len(p.ManagedFields) > 0 {
			t.Errorf("item %s: kind %q, %d managed fields", p.Name, p.Kind, len(p.ManagedFields))
		}
	}
	if diff := cmp.Diff([]string{"ls-a", "ls-b"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}
