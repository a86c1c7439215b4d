//go:build cluster

package apiversions

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The capabilities, as the API types name them.
const (
	connector = v1alpha1.Capability(plugins.CapabilityConnector)
	view      = v1alpha1.Capability(plugins.CapabilityView)
)

// verifiedAt is the time the sample statuses say, whole seconds as the API
// keeps them.
var verifiedAt = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))

// samplePlugins are Plugins as an install holds them, every field of the
// schema set somewhere: a connector with a config schema and config, and a
// view with owner hosts, a Secret, a data tier and resources; each with a
// status as the operator writes it.
func samplePlugins() []*v1alpha1.Plugin {
	fx := testutil.MakePlugin("fx", testutil.Image("nbp-fx")).Egress("api.nbp.pl").
		ConfigSchema(`{"type":"object","properties":{"currencies":{"type":"array","items":{"type":"string"}}}}`).
		Config(`{"currencies":["EUR","USD"]}`).Obj()
	fx.Status = v1alpha1.PluginStatus{
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunning, Message: "running", LastTransitionTime: verifiedAt, ObservedGeneration: 1},
			{Type: v1alpha1.ConditionSignatureVerified, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonVerified, Message: "signed by openfief-ci", LastTransitionTime: verifiedAt, ObservedGeneration: 1},
			{Type: v1alpha1.ConditionApprovalRequired, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNothingPending, Message: "", LastTransitionTime: verifiedAt, ObservedGeneration: 1},
		},
		Deployed: &v1alpha1.DeployedVersion{
			Image: fx.Spec.Image, Manifest: fx.Spec.Manifest, Config: fx.Spec.Config,
			Signer: "openfief-ci", Trust: v1alpha1.ReasonVerified, VerifiedAt: &verifiedAt,
		},
		Effective: &v1alpha1.EffectivePermissions{
			Capabilities: []v1alpha1.Capability{connector},
			Egress:       []string{"api.nbp.pl:443"},
			Resources:    &v1alpha1.Resources{Memory: "128Mi", CPU: "500m", Tmp: "64Mi"},
		},
	}

	records := testutil.MakePlugin("records", testutil.Image("webdav-csv")).
		Capabilities(view).OwnerEgress(1).Secret("webdav-credentials", "/secrets/webdav").
		DataTiers("accounts").Config(`{"folder":"/finance"}`).Obj()
	records.Spec.Manifest.Resources = &v1alpha1.Resources{Memory: "256Mi", Tmp: "128Mi"}
	records.Status = v1alpha1.PluginStatus{
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAwaitingApproval, Message: "waiting for the owner", LastTransitionTime: verifiedAt, ObservedGeneration: 1},
			{Type: v1alpha1.ConditionApprovalRequired, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPermissionsPending, Message: "resources", LastTransitionTime: verifiedAt, ObservedGeneration: 1},
		},
		PendingApproval: &v1alpha1.PendingApproval{
			Secrets:   []string{"webdav-credentials"},
			DataTiers: []string{"accounts"},
			Resources: &v1alpha1.Resources{Memory: "256Mi"},
		},
	}
	return []*v1alpha1.Plugin{fx, records}
}

// sampleGrants are the owner's grants for samplePlugins, with a status.
func sampleGrants() []*v1alpha1.PluginGrant {
	fx := testutil.MakeGrant("fx").Capabilities(connector).Egress("api.nbp.pl").Obj()
	records := testutil.MakeGrant("records").Capabilities(view).OwnerEgress("dav.example.org").
		Secret("webdav-credentials", "my-webdav").PullSecrets("registry-login").DataTiers("accounts").Obj()
	records.Spec.Resources = &v1alpha1.Resources{Memory: "256Mi", CPU: "1", Tmp: "128Mi"}
	out := []*v1alpha1.PluginGrant{fx, records}
	for _, g := range out {
		g.Status = v1alpha1.PluginGrantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid, Message: "", LastTransitionTime: verifiedAt, ObservedGeneration: 1},
		}}
	}
	return out
}

// asVersion converts a typed v1alpha1 object to its unstructured form
// labelled with another version of the group: the same JSON under another
// apiVersion, which is all a None conversion changes.
func asVersion(t *testing.T, obj runtime.Object, version, kind string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(group + "/" + version)
	u.SetKind(kind)
	return u
}

// createWithStatus creates obj in its version, then writes its status
// through the status subresource, as the operator does; it returns the
// object as stored.
func (e *env) createWithStatus(ctx context.Context, plural string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	status, hasStatus := obj.Object["status"]
	r := e.dyn.Resource(gvr(obj.GroupVersionKind().Version, plural)).Namespace(obj.GetNamespace())
	created, err := r.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil || !hasStatus {
		return created, err
	}
	created.Object["status"] = status
	return r.UpdateStatus(ctx, created, metav1.UpdateOptions{})
}

// get reads one object of plural in version.
func (e *env) get(t *testing.T, version, plural, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.dyn.Resource(gvr(version, plural)).Namespace(plugins.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s in %s: %v", plural, name, version, err)
	}
	return u
}

// list reads every object of plural in version, by name.
func (e *env) list(t *testing.T, version, plural string) map[string]*unstructured.Unstructured {
	t.Helper()
	l, err := e.dyn.Resource(gvr(version, plural)).Namespace(plugins.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s in %s: %v", plural, version, err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range l.Items {
		out[l.Items[i].GetName()] = &l.Items[i]
	}
	return out
}

// sameButVersion returns how a and b differ in anything but apiVersion
// (metadata, managedFields, spec and status included), or "".
func sameButVersion(a, b *unstructured.Unstructured) string {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Object, "apiVersion")
	delete(b.Object, "apiVersion")
	return cmp.Diff(a.Object, b.Object)
}

// typedPlugin decodes a Plugin read in the current version into the Go type
// the operator, the core and the CLI use.
func typedPlugin(t *testing.T, u *unstructured.Unstructured) *v1alpha1.Plugin {
	t.Helper()
	if u.GetAPIVersion() != v1alpha1.GroupVersion.String() {
		t.Fatalf("Plugin %s read as %s, want %s", u.GetName(), u.GetAPIVersion(), v1alpha1.GroupVersion)
	}
	p := &v1alpha1.Plugin{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, p, true); err != nil {
		t.Fatalf("Plugin %s does not decode strictly into v1alpha1.Plugin: %v", u.GetName(), err)
	}
	return p
}

// typedGrant is typedPlugin for a PluginGrant.
func typedGrant(t *testing.T, u *unstructured.Unstructured) *v1alpha1.PluginGrant {
	t.Helper()
	if u.GetAPIVersion() != v1alpha1.GroupVersion.String() {
		t.Fatalf("PluginGrant %s read as %s, want %s", u.GetName(), u.GetAPIVersion(), v1alpha1.GroupVersion)
	}
	g := &v1alpha1.PluginGrant{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, g, true); err != nil {
		t.Fatalf("PluginGrant %s does not decode strictly into v1alpha1.PluginGrant: %v", u.GetName(), err)
	}
	return g
}

// wantContent is what each object must read as, whatever version it was
// written or stored in: its spec and status, by plural and name.
type wantContent map[string]map[string]any

// record keeps obj's spec and status as what it must read as.
func (w wantContent) record(t *testing.T, plural string, obj runtime.Object) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	if w[plural] == nil {
		w[plural] = map[string]any{}
	}
	w[plural][u.GetName()] = content(u)
}

// content is an object's spec and status.
func content(u *unstructured.Unstructured) map[string]any {
	return map[string]any{"spec": u.Object["spec"], "status": u.Object["status"]}
}

// requireReadable checks that every object of want reads, in each version
// given, as want says (for the resources want names), decodes strictly into the Go types in the current
// version, and reads the same in every version but for apiVersion; and that
// nothing else is there.
func (e *env) requireReadable(t *testing.T, want wantContent, versions ...string) {
	t.Helper()
	for _, k := range kinds {
		if _, ok := want[k.plural]; !ok {
			continue
		}
		var first map[string]*unstructured.Unstructured
		for _, v := range versions {
			got := e.list(t, v, k.plural)
			if len(got) != len(want[k.plural]) {
				t.Fatalf("%s in %s: %d objects, want %d", k.plural, v, len(got), len(want[k.plural]))
			}
			for name, w := range want[k.plural] {
				u, ok := got[name]
				if !ok {
					t.Fatalf("%s %s missing in %s", k.plural, name, v)
				}
				if u.GetAPIVersion() != group+"/"+v || u.GetKind() != k.kind {
					t.Errorf("%s %s read in %s as %s %s", k.plural, name, v, u.GetAPIVersion(), u.GetKind())
				}
				// A get reads what a list reads.
				if d := sameButVersion(e.get(t, v, k.plural, name), u); d != "" {
					t.Errorf("%s %s in %s: get and list differ (-get +list):\n%s", k.plural, name, v, d)
				}
				if d := cmp.Diff(w, content(u)); d != "" {
					t.Errorf("%s %s read in %s (-want +got):\n%s", k.plural, name, v, d)
				}
				if v == current {
					switch k.plural {
					case "plugins":
						typedPlugin(t, u)
					default:
						typedGrant(t, u)
					}
				}
				if first != nil {
					if d := sameButVersion(first[name], u); d != "" {
						t.Errorf("%s %s reads differently in %s and %s (-%s +%s):\n%s", k.plural, name, versions[0], v, versions[0], v, d)
					}
				}
			}
			if first == nil {
				first = got
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
