//go:build cluster

package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestWriteGrantWhileStatusMoves checks what approve writes when the grant
// changes between its read and its write, as the operator's status write
// does moments after every change: a grant whose status alone moved is
// written again with the approval; a grant whose spec moved is refused,
// since the owner approved against the spec they were shown. The change
// is made by the API server itself, between approve's read and its write.
func TestWriteGrantWhileStatusMoves(t *testing.T) {
	k := newKube(t)
	ctx := context.Background()
	env := &Env{Namespace: plugins.Namespace}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	base, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	approval := plugins.Approval{Grant: plugins.Grant{
		Capabilities: []plugins.Capability{plugins.CapabilityConnector},
		Egress:       []string{"api.nbp.pl:443"},
	}}

	// meddle returns a client whose first write (a patch) of a PluginGrant
	// is preceded by change, applied to the grant as it then stands.
	meddle := func(change func(c client.Client, g *v1alpha1.PluginGrant) error) client.Client {
		done := false
		return interceptor.NewClient(base, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if g, ok := obj.(*v1alpha1.PluginGrant); ok && !done {
					done = true
					var now v1alpha1.PluginGrant
					if err := c.Get(ctx, client.ObjectKeyFromObject(g), &now); err != nil {
						return err
					}
					if err := change(c, &now); err != nil {
						return err
					}
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		})
	}
	read := func(name string) *v1alpha1.PluginGrant {
		t.Helper()
		g := &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
			Spec: v1alpha1.PluginGrantSpec{Capabilities: []v1alpha1.Capability{"connector"}}}
		if err := k.c.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		return g
	}

	t.Run("status moved", func(t *testing.T) {
		g := read("grant-status-moved")
		c := meddle(func(c client.Client, now *v1alpha1.PluginGrant) error {
			now.Status.ObservedGeneration = now.Generation
			now.Status.Conditions = []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "set by the test", LastTransitionTime: metav1.Now()}}
			return c.Status().Update(ctx, now)
		})
		verb, err := env.writeGrant(ctx, c, g.Name, g, approval)
		if err != nil {
			t.Fatalf("writeGrant after a status write: %v", err)
		}
		if verb != "configured" {
			t.Errorf("verb %q, want configured", verb)
		}
		got := k.grant(t, g.Name)
		if diff := cmp.Diff([]v1alpha1.EgressHost{"api.nbp.pl:443"}, got.Spec.Egress); diff != "" {
			t.Errorf("egress (-want +got):\n%s", diff)
		}
		if len(got.Status.Conditions) != 1 {
			t.Errorf("the status written meanwhile is gone: %+v", got.Status)
		}
	})
	t.Run("spec moved", func(t *testing.T) {
		g := read("grant-spec-moved")
		c := meddle(func(c client.Client, now *v1alpha1.PluginGrant) error {
			now.Spec.DataTiers = []v1alpha1.DataTier{"rates"}
			return c.Update(ctx, now)
		})
		_, err := env.writeGrant(ctx, c, g.Name, g, approval)
		if err == nil || ExitCode(err) != ExitFailure || !strings.Contains(err.Error(), "changed while this command ran; run it again") {
			t.Fatalf("writeGrant after another spec write: %v (exit %d), want a refusal", err, ExitCode(err))
		}
		got := k.grant(t, g.Name)
		if len(got.Spec.Egress) != 0 || len(got.Spec.DataTiers) != 1 {
			t.Errorf("the grant is %+v, want the other writer's spec kept and nothing of the approval", got.Spec)
		}
	})
}
