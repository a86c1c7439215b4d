package platform

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// TestCheckUpgrade: a newer or equal version passes, an older one is
// refused unless allowed, and versions that do not compare are refused.
func TestCheckUpgrade(t *testing.T) {
	for name, tc := range map[string]struct {
		installed, next string
		allow, ok       bool
	}{
		"first install":                   {"", "v0.1.0", false, true},
		"same":                            {"v0.2.0", "v0.2.0", false, true},
		"newer":                           {"v0.1.0", "v0.2.0", false, true},
		"older":                           {"v0.2.0", "v0.1.0", false, false},
		"older allowed":                   {"v0.2.0", "v0.1.0", true, true},
		"newer pseudo-version":            {"v0.0.0-20261201100000-aaaaaaaaaaaa", "v0.0.0-20261201120000-bbbbbbbbbbbb", false, true},
		"older pseudo-version":            {"v0.0.0-20261201120000-bbbbbbbbbbbb", "v0.0.0-20261201100000-aaaaaaaaaaaa", false, false},
		"edited build of the same commit": {"v0.0.0-20261201100000-aaaaaaaaaaaa", "v0.0.0-20261201100000-aaaaaaaaaaaa-dirty", false, true},
		"not comparable":                  {"release-a", "release-b", false, false},
		"not comparable allowed":          {"release-a", "release-b", true, true},
	} {
		err := CheckUpgrade(tc.installed, tc.next, tc.allow)
		if (err == nil) != tc.ok {
			t.Errorf("%s: CheckUpgrade(%q, %q, %v) = %v, want ok=%v", name, tc.installed, tc.next, tc.allow, err, tc.ok)
		}
	}
}

// TestAPIServerCIDRs: addresses become /32 or /128, CIDRs are masked,
// duplicates go, the order is fixed; anything else is refused.
func TestAPIServerCIDRs(t *testing.T) {
	got, err := deploy.APIServerCIDRs([]string{"10.0.0.9", "fd00::1", "10.0.0.2/32", "10.0.0.9/32", "172.16.5.7/16"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.2/32", "10.0.0.9/32", "172.16.0.0/16", "fd00::1/128"}, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	for _, bad := range [][]string{nil, {"0.0.0.0/0"}, {"::/0"}, {"api.example.com"}, {"10.0.0.1/33"}, {"fe80::1%eth0"}} {
		if got, err := deploy.APIServerCIDRs(bad); err == nil {
			t.Errorf("APIServerCIDRs(%q) = %v, want refused", bad, got)
		}
	}
}

// writeOverlay writes a platform overlay of version for the tests, and
// returns its directory.
func writeOverlay(t *testing.T, version string, extra string) string {
	t.Helper()
	root, err := images.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]plugins.ImageRef{}
	for i, n := range []string{"operator", "egress-proxy", "openfief-core", overlay.CheckProbe} {
		ref, err := plugins.ParseImageRef("registry.example.com/openfief/" + n + "@sha256:" + strings.Repeat(string(rune('a'+i)), 64))
		if err != nil {
			t.Fatal(err)
		}
		refs[n] = ref
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "release")
	if err := overlay.WritePlatform(base, filepath.Join(root, "deploy"), overlay.Platform{Refs: refs, Version: version}); err != nil {
		t.Fatal(err)
	}
	if extra == "" {
		return base
	}
	top := filepath.Join(dir, "top")
	if err := os.MkdirAll(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "extra.yaml"), []byte(extra), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "kustomization.yaml"), []byte("resources:\n  - ../release\n  - extra.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return top
}

// TestLoad: a platform overlay loads in apply order (the namespace, then
// the CRDs, Deployments last), every object labelled as the command's, the
// API server placeholder there to fill; what is not the platform's is
// refused, naming the object.
func TestLoad(t *testing.T) {
	s, err := Load(writeOverlay(t, "v1.0.0", ""))
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != "v1.0.0" {
		t.Errorf("version %q", s.Version)
	}
	if first, last := s.Objects[0], s.Objects[len(s.Objects)-1]; first.GetKind() != "Namespace" || s.Objects[1].GetKind() != "CustomResourceDefinition" || last.GetKind() != "Deployment" {
		t.Errorf("apply order starts with %s, %s and ends with %s", first.GetKind(), s.Objects[1].GetKind(), last.GetKind())
	}
	release := 0
	for _, u := range s.Objects {
		if u.GetLabels()[LabelManagedBy] != ValueManagedBy {
			t.Errorf("%s is not labelled as the command's", describe(u))
		}
		if u.GetKind() == "ConfigMap" && u.GetName() == deploy.ReleaseConfigMap {
			release++
			if probe, _, _ := unstructured.NestedString(u.Object, "data", deploy.ReleaseKeyCheckProbe); !strings.HasPrefix(probe, "registry.example.com/openfief/check-probe@sha256:") {
				t.Errorf("%s names the check probe %q", describe(u), probe)
			}
		}
	}
	if release != 1 {
		t.Errorf("%d ConfigMaps %s/%s, want 1 (OF-29)", release, plugins.Namespace, deploy.ReleaseConfigMap)
	}
	if len(s.Deployments()) != 3 || !s.HasAPIServerPlaceholder() {
		t.Errorf("%d Deployments, placeholder %v", len(s.Deployments()), s.HasAPIServerPlaceholder())
	}
	if n, err := s.SetAPIServer([]string{"10.1.2.3"}); err != nil || n != 2 || s.HasAPIServerPlaceholder() {
		t.Errorf("SetAPIServer changed %d rules (%v), placeholder left: %v", n, err, s.HasAPIServerPlaceholder())
	}

	for name, tc := range map[string]struct{ extra, want string }{
		"a Secret": {"apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: openfief, labels: {app.kubernetes.io/version: v1.0.0}}\n",
			"Secret openfief/creds: the overlay holds a /v1, Kind=Secret, which is not a kind of the platform"},
		"another namespace": {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: kube-system, labels: {app.kubernetes.io/version: v1.0.0}}\n",
			"ConfigMap kube-system/x: the platform's namespaced objects live in openfief only"},
		"another version": {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: openfief, labels: {app.kubernetes.io/version: v2.0.0}}\n",
			"ConfigMap openfief/x is of version v2.0.0"},
		"no version": {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: openfief}\n",
			"ConfigMap openfief/x has no app.kubernetes.io/version label"},
	} {
		_, err := Load(writeOverlay(t, "v1.0.0", tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// TestLoadReplicasComponent: a release overlay with the core's
// postgres-replicas component on top loads as a platform, every object of
// the release's version (the PodDisruptionBudget too), the core as three
// replicas on PostgreSQL and without its SQLite claim.
// TestUninstallKnowsTheProxy: the Deployment Uninstall removes after the
// plugin workloads (egressProxyDeployment) is the one the platform holds,
// so a rename of deploy/egress-proxy's cannot quietly put the proxy back
// among the first, where it drains the plugins' tunnels for its grace.
func TestUninstallKnowsTheProxy(t *testing.T) {
	s, err := Load(writeOverlay(t, "v1.0.0", ""))
	if err != nil {
		t.Fatal(err)
	}
	var deployments []string
	for _, u := range s.Objects {
		if u.GetKind() == "Deployment" {
			deployments = append(deployments, u.GetNamespace()+"/"+u.GetName())
		}
	}
	if !slices.Contains(deployments, plugins.Namespace+"/"+egressProxyDeployment) {
		t.Errorf("the platform's Deployments %v hold no %s/%s", deployments, plugins.Namespace, egressProxyDeployment)
	}
}

func TestLoadReplicasComponent(t *testing.T) {
	base := writeOverlay(t, "v1.0.0", "")
	root, err := images.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(filepath.Dir(base), "replicas")
	if err := os.MkdirAll(top, 0o755); err != nil {
		t.Fatal(err)
	}
	component, err := filepath.Rel(top, filepath.Join(root, "deploy", "core", "components", "postgres-replicas"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "kustomization.yaml"), []byte("resources:\n  - ../release\ncomponents:\n  - "+component+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(top)
	if err != nil {
		t.Fatal(err)
	}
	var pdb, pvc bool
	for _, u := range s.Objects {
		switch u.GetKind() {
		case "PodDisruptionBudget":
			pdb = u.GetName() == "openfief-core" && u.GetLabels()[LabelVersion] == "v1.0.0"
		case "PersistentVolumeClaim":
			pvc = true
		case "Deployment":
			if u.GetName() == deploy.CoreDeployment {
				if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); n != 3 {
					t.Errorf("the core has %d replicas, want 3", n)
				}
			}
		}
	}
	if !pdb || pvc {
		t.Errorf("PodDisruptionBudget of the release's version: %v; SQLite claim left: %v", pdb, pvc)
	}
}

// TestStale: objects a new version dropped are pruned, except the data
// (CRDs, the namespace, the claim), which is kept.
func TestStale(t *testing.T) {
	s, err := Load(writeOverlay(t, "v1.0.0", ""))
	if err != nil {
		t.Fatal(err)
	}
	obj := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	owned := append([]*unstructured.Unstructured{}, s.Objects...)
	owned = append(owned,
		obj("v1", "ConfigMap", "openfief", "old"),
		obj("apps/v1", "Deployment", "openfief", "openfief-old"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "olds.openfief.io"),
		obj("v1", "PersistentVolumeClaim", "openfief", "old-data"))
	prune, keep := Stale(s, owned)
	names := func(l []*unstructured.Unstructured) []string {
		var out []string
		for _, u := range l {
			out = append(out, describe(u))
		}
		return out
	}
	if diff := cmp.Diff([]string{"ConfigMap openfief/old", "Deployment openfief/openfief-old"}, names(prune)); diff != "" {
		t.Errorf("pruned (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string{"CustomResourceDefinition olds.openfief.io", "PersistentVolumeClaim openfief/old-data"}, names(keep)); diff != "" {
		t.Errorf("kept (-want +got)\n%s", diff)
	}
}

// TestCoreSchema: the core Deployment's annotation is read, a release
// without it says so, and an annotation that is not a positive number is
// refused.
func TestCoreSchema(t *testing.T) {
	core := func(annotations map[string]string) []*unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		u.SetNamespace(plugins.Namespace)
		u.SetName(deploy.CoreDeployment)
		u.SetAnnotations(annotations)
		return []*unstructured.Unstructured{u}
	}
	for name, tc := range map[string]struct {
		objs   []*unstructured.Unstructured
		schema int
		ok     bool
		err    bool
	}{
		"annotated":     {core(map[string]string{deploy.CoreSchemaAnnotation: "3"}), 3, true, false},
		"not annotated": {core(nil), 0, false, false},
		"no core":       {nil, 0, false, false},
		"not a number":  {core(map[string]string{deploy.CoreSchemaAnnotation: "three"}), 0, false, true},
		"zero":          {core(map[string]string{deploy.CoreSchemaAnnotation: "0"}), 0, false, true},
		"negative":      {core(map[string]string{deploy.CoreSchemaAnnotation: "-1"}), 0, false, true},
		"far too long":  {core(map[string]string{deploy.CoreSchemaAnnotation: "1234567"}), 0, false, true},
		"leading zero":  {core(map[string]string{deploy.CoreSchemaAnnotation: "03"}), 0, false, true},
		"signed":        {core(map[string]string{deploy.CoreSchemaAnnotation: "+3"}), 0, false, true},
	} {
		schema, ok, err := CoreSchema(tc.objs)
		if schema != tc.schema || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("%s: CoreSchema = %d, %v, %v; want %d, %v, error %v", name, schema, ok, err, tc.schema, tc.ok, tc.err)
		}
	}
}

// TestCheckCoreSchema: a core that knows the record's schema or more is
// allowed; one that knows less is refused with the way back.
func TestCheckCoreSchema(t *testing.T) {
	for _, tc := range []struct {
		installed, next int
		ok              bool
	}{{3, 3, true}, {3, 4, true}, {3, 2, false}, {1, 0, false}} {
		err := CheckCoreSchema(tc.installed, tc.next, "v0.1.0")
		if (err == nil) != tc.ok {
			t.Errorf("CheckCoreSchema(%d, %d) = %v, want ok=%v", tc.installed, tc.next, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "openfief core restore") {
			t.Errorf("CheckCoreSchema(%d, %d) = %v: does not say how to go back", tc.installed, tc.next, err)
		}
	}
}
