//go:build cluster

package incluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/attention"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The plugins of the registry-down phase: one running before the outage,
// one installed before it and approved during it, one created during it.
const (
	downRunning  = "rd-running"
	downApproved = "rd-approved"
	downApplied  = "rd-applied"
)

// testRegistryDown stops the registry that serves the plugin images (the
// stack's bridge registry, where every phase publishes them) and, while it
// is down, restarts the operator (its pod deleted), upgrades the platform to
// this tree stamped as a newer version and rolls it back, as a user would
// with `openfief platform upgrade`. Fail static and fail closed (OF-2), on
// the real node:
//   - the plugin that ran before keeps its pod, container and Deployment
//     revision through every move, though no operator after the first can
//     verify its image again, and the core calls it after each move; its
//     SignatureVerified turns Unknown (RegistryUnavailable, naming the
//     registry, saying it keeps running) and Ready stays Running;
//   - `openfief plugin install` refuses a new plugin (exit 7, the registry
//     named);
//   - a plugin installed before the outage and approved during it (approve
//     warns it will not run until its image is verified), and one created
//     during it by writing the Plugin as a GitOps tool would, do not run:
//     no Deployment, no pod; their conditions and `openfief plugin status`
//     say the registry cannot be read, and `openfief status` lists every
//     plugin of the phase as ImageUnchecked;
//   - once the registry serves again both start without anyone acting (the
//     operator tries an unread registry again every testRegistryRetry, its
//     --registry-retry), every
//     SignatureVerified is True, Ready is Running, `openfief status` lists
//     no image unchecked, and the first plugin still runs its first pod.
//
// The plugins are uninstalled, and the registry serves, when the phase
// ends, passed or failed. The platform ends at the release it was installed
// from.
func testRegistryDown(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	kc := mustClient(t, e.c)
	ref := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	probe := e.preg.publish(t, "plugins/probe", nbpFxManifest(t, e.root), map[string][]byte{"plugin": e.probeBinary(t)}, e.signer)
	t.Cleanup(func() {
		if err := e.stack.StartRegistry(); err != nil {
			t.Errorf("serving the registry again: %v", err)
		}
		uninstallPlugins(t, e, []string{downRunning, downApproved, downApplied})
	})
	openfief(t, e.kubeconfig, "plugin", "install", downRunning, "--image", ref.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "approve", downRunning, "--yes")
	// Installed (the CLI verified it) but not approved: it waits for its
	// grant, and the operator has verified its image once.
	openfief(t, e.kubeconfig, "plugin", "install", downApproved, "--image", probe.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	runningPluginPod(t, e.cs, downRunning)
	before := readPluginState(t, e, downRunning)
	waitCalled(t, e, downRunning, time.Time{})
	signatureVerified(t, kc, downApproved)

	// The outage: both of the registry's ports refuse connections.
	must(t, e.stack.StopRegistry())
	down := time.Now()
	t.Logf("stopped the registry %s (%s on loopback)", e.preg.bridge, e.preg.loopback)
	code, out := e.cli(ctx, "plugin", "install", downApplied, "--image", probe.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	if code != cli.ExitRegistryUnavailable || !strings.Contains(out, e.preg.bridge) {
		t.Errorf("openfief plugin install while the registry is down: exit %d, want %d naming %s\n%s", code, cli.ExitRegistryUnavailable, e.preg.bridge, out)
	}

	// (a) The operator restarts: its verified images were in memory only.
	start := time.Now()
	restartOperator(t, e)
	// The new operator has checked it once it says the registry cannot be
	// read; that pass is the one that would have stopped it.
	waitCondition(t, kc, downRunning, v1alpha1.ConditionSignatureVerified, metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, e.preg.bridge)
	checkPluginUntouched(t, downRunning, before, readPluginState(t, e, downRunning))
	checkCondition(t, kc, downRunning, v1alpha1.ConditionSignatureVerified, metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, failStaticSays)
	checkCondition(t, kc, downRunning, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	out = openfief(t, e.kubeconfig, "plugin", "approve", downApproved, "--yes")
	if !strings.Contains(out, "will not run until") {
		t.Errorf("openfief plugin approve %s while the registry is down does not warn that the image is not verified yet", downApproved)
	}
	checkWaitsForRegistry(t, e, kc, downApproved)
	checkUnchecked(t, e, downRunning, downApproved)
	checkPluginUntouched(t, downRunning, before, readPluginState(t, e, downRunning))
	waitCalled(t, e, downRunning, start)
	t.Logf("operator restarted with the registry down: %s kept its pod and was called again, %s waits, in %s",
		downRunning, downApproved, time.Since(start).Round(100*time.Millisecond))

	// (b) A platform upgrade and its rollback, both with the registry down.
	nextOverlay, next, nextRefs := restampedRelease(t, e, "registry-down-test")
	moves := []struct {
		name, overlay, version string
		refs                   map[string]plugins.ImageRef
		args                   []string
	}{
		{"upgrade", nextOverlay, next, nextRefs, nil},
		{"rollback", e.overlay, e.src.Tag(), e.refs, []string{"--allow-downgrade"}},
	}
	for _, m := range moves {
		start := time.Now()
		old := platformPods(t, e)
		args := append([]string{"platform", "upgrade", "--overlay", m.overlay, "--timeout", "4m"}, m.args...)
		code, out := e.cli(ctx, args...)
		t.Logf("openfief %s: exit %d in %s\n%s", strings.Join(args, " "), code, time.Since(start).Round(100*time.Millisecond), out)
		if code != cli.ExitOK {
			t.Fatalf("%s with the registry down: openfief platform upgrade exited %d", m.name, code)
		}
		done := time.Now()
		waitPlatformRolled(t, e, m.refs, m.version, old)
		waitOperatorLeads(t, e, old)
		if m.name == "upgrade" {
			// Created while the registry is down, as a GitOps tool would
			// apply it: the Plugin the CLI wrote for the other, renamed.
			createLike(t, kc, downApproved, downApplied)
			openfief(t, e.kubeconfig, "plugin", "approve", downApplied, "--yes")
		}
		waitCalled(t, e, downRunning, done)
		checkPluginUntouched(t, downRunning, before, readPluginState(t, e, downRunning))
		checkCondition(t, kc, downRunning, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
		checkCondition(t, kc, downRunning, v1alpha1.ConditionSignatureVerified, metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, e.preg.bridge, failStaticSays)
		for _, name := range []string{downApproved, downApplied} {
			checkWaitsForRegistry(t, e, kc, name)
		}
		checkUnchecked(t, e, downRunning, downApproved, downApplied)
		t.Logf("%s to %s with the registry down: the platform rolled and its operator leads, %s kept its pod and was called again, the new ones wait; in %s",
			m.name, m.version, downRunning, time.Since(start).Round(100*time.Millisecond))
	}

	// The registry returns: what waited starts on the operator's next try.
	must(t, e.stack.StartRegistry())
	back := time.Now()
	t.Logf("the registry served again after %s down", back.Sub(down).Round(100*time.Millisecond))
	for _, name := range []string{downApproved, downApplied} {
		runningPluginPod(t, e.cs, name)
	}
	for _, name := range []string{downRunning, downApproved, downApplied} {
		waitCondition(t, kc, name, v1alpha1.ConditionSignatureVerified, metav1.ConditionTrue, v1alpha1.ReasonSignedByTrustedSigner)
		waitCondition(t, kc, name, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	}
	checkUnchecked(t, e)
	t.Logf("the registry back: %s and %s run, every condition clear, %s after it served",
		downApproved, downApplied, time.Since(back).Round(100*time.Millisecond))
	checkPluginUntouched(t, downRunning, before, readPluginState(t, e, downRunning))
	code, out = e.cli(ctx, "plugin", "status", downApplied)
	t.Logf("openfief plugin status %s: exit %d\n%s", downApplied, code, out)
	if strings.Contains(out, v1alpha1.ReasonRegistryUnavailable) {
		t.Errorf("openfief plugin status %s still says %s once the registry is back", downApplied, v1alpha1.ReasonRegistryUnavailable)
	}
}

// failStaticSays is what the SignatureVerified message of a version the
// operator keeps running through an outage says (OF-2).
const failStaticSays = "keeps running"

// checkUnchecked checks that `openfief status` lists ImageUnchecked for
// exactly those of the phase's plugins that are named.
func checkUnchecked(t *testing.T, e *platformEnv, names ...string) {
	t.Helper()
	code, out := e.cli(context.Background(), "status", "-o", "json")
	var doc struct{ Items []attention.Item }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Errorf("openfief status -o json (exit %d): %v\n%s", code, err, out)
		return
	}
	var got []string
	for _, it := range doc.Items {
		if it.Kind == attention.KindImageUnchecked && strings.HasPrefix(it.Plugin, "rd-") {
			got = append(got, it.Plugin)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("openfief status lists %s for %v, want %v\n%s", attention.KindImageUnchecked, got, want, out)
	}
}

// restartOperator deletes the operator's pod and waits until its
// Deployment's new pod is Available and leads.
func restartOperator(t *testing.T, e *platformEnv) {
	t.Helper()
	old := platformPods(t, e)
	deletePods(t, e, "openfief-operator")
	waitPlatformAvailable(t, e)
	waitOperatorLeads(t, e, old)
}

// waitOperatorLeads waits until the operator's leader election Lease is
// held by a pod that is not one of old: only the leader reconciles, so
// from then on what the Plugins show is the new operator's doing. A few
// seconds more let it go through every Plugin once.
func waitOperatorLeads(t *testing.T, e *platformEnv, old map[types.UID]string) {
	t.Helper()
	ctx := context.Background()
	was := map[string]bool{}
	for _, name := range old {
		was[name] = true
	}
	var holder string
	testutil.Eventually(t, 2*time.Minute, "a new operator pod holds the Lease "+operator.LeaderElectionID, func() (bool, string) {
		var l coordinationv1.Lease
		if err := mustClient(t, e.c).Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: operator.LeaderElectionID}, &l); err != nil {
			return false, err.Error()
		}
		if l.Spec.HolderIdentity == nil {
			return false, "no holder"
		}
		holder = *l.Spec.HolderIdentity
		// controller-runtime names the holder <hostname>_<uuid>; a pod's
		// hostname is its name.
		pod, _, _ := strings.Cut(holder, "_")
		return pod != "" && !was[pod], "held by " + holder
	})
	time.Sleep(5 * time.Second)
	t.Logf("the operator's Lease is held by %s", holder)
}

// createLike creates the Plugin name with the spec of the Plugin from.
func createLike(t *testing.T, kc client.Client, from, name string) {
	t.Helper()
	ctx := context.Background()
	var src v1alpha1.Plugin
	must(t, kc.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: from}, &src))
	p := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Namespace: plugins.Namespace, Name: name}, Spec: *src.Spec.DeepCopy()}
	must(t, kc.Create(ctx, p))
}

// checkWaitsForRegistry checks that the approved plugin does not run, for
// want of its image's verification. Once the operator has seen its grant
// (ApprovalRequired False, written in the pass that decides whether it
// runs): its Ready condition is False and names the registry,
// SignatureVerified is Unknown with RegistryUnavailable, no Deployment or
// pod of it exists, and `openfief plugin status` says so.
func checkWaitsForRegistry(t *testing.T, e *platformEnv, kc client.Client, name string) {
	t.Helper()
	waitCondition(t, kc, name, v1alpha1.ConditionApprovalRequired, metav1.ConditionFalse, v1alpha1.ReasonNothingPending)
	checkCondition(t, kc, name, v1alpha1.ConditionSignatureVerified, metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, e.preg.bridge)
	checkCondition(t, kc, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSignatureNotVerified, e.preg.bridge)
	if pods := listPods(t, e, plugins.LabelPluginName+"="+name); len(pods) != 0 {
		t.Errorf("plugin %s runs pod %s while its image cannot be verified", name, pods[0].Name)
	}
	_, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(context.Background(), plugins.ServiceAccountName(name), metav1.GetOptions{})
	switch {
	case err == nil:
		t.Errorf("plugin %s has a Deployment while its image cannot be verified", name)
	case !apierrors.IsNotFound(err):
		t.Errorf("reading plugin %s's Deployment: %v", name, err)
	}
	code, out := e.cli(context.Background(), "plugin", "status", name)
	if !strings.Contains(out, v1alpha1.ReasonRegistryUnavailable) || !strings.Contains(out, e.preg.bridge) {
		t.Errorf("openfief plugin status %s (exit %d) does not say the registry %s cannot be read:\n%s", name, code, e.preg.bridge, out)
	} else {
		t.Logf("openfief plugin status %s: exit %d\n%s", name, code, out)
	}
}

// conditionSays reports whether the Plugin's condition of type typ has
// status and reason and its message contains each of in, with what it
// holds.
func conditionSays(kc client.Client, name, typ string, status metav1.ConditionStatus, reason string, in ...string) (bool, string) {
	var p v1alpha1.Plugin
	if err := kc.Get(context.Background(), client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &p); err != nil {
		return false, err.Error()
	}
	c := apimeta.FindStatusCondition(p.Status.Conditions, typ)
	if c == nil {
		return false, "no " + typ + " condition"
	}
	got := fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	for _, s := range in {
		if !strings.Contains(c.Message, s) {
			return false, got
		}
	}
	return c.Status == status && c.Reason == reason, got
}

// waitCondition waits (at most 3 minutes: the operator tries an unread
// registry again every minute) until the condition says what it should.
func waitCondition(t *testing.T, kc client.Client, name, typ string, status metav1.ConditionStatus, reason string, in ...string) {
	t.Helper()
	testutil.Eventually(t, 3*time.Minute, fmt.Sprintf("plugin %s: %s=%s %s", name, typ, status, reason), func() (bool, string) {
		return conditionSays(kc, name, typ, status, reason, in...)
	})
}

// checkCondition fails unless the condition says so now.
func checkCondition(t *testing.T, kc client.Client, name, typ string, status metav1.ConditionStatus, reason string, in ...string) {
	t.Helper()
	if ok, got := conditionSays(kc, name, typ, status, reason, in...); !ok {
		t.Errorf("plugin %s: %s is %s, want %s %s saying %q", name, typ, got, status, reason, in)
	}
}
