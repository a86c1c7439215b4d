//go:build cluster

package operator

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestGrantedPullSecrets checks the grant's image pull Secrets reach the pod
// spec and the plugin's ServiceAccount, sorted, and that taking them out of
// the grant takes them off both.
func TestGrantedPullSecrets(t *testing.T) {
	f := newFixture(t)
	p := testutil.MakePlugin("private", testutil.Image("private-1")).Obj()
	f.images.sign(p.Spec.Image)
	f.create(p, testutil.GrantFor(p).PullSecrets("regcred", "ghcr-pull").Obj())
	f.waitReady(p.Name, v1alpha1.ReasonProgressing)

	waitPullSecrets := func(want []string) {
		t.Helper()
		testutil.Eventually(t, waitTimeout, "pull secrets "+describeJSON(want), func() (bool, string) {
			var dep appsv1.Deployment
			var sa corev1.ServiceAccount
			if !f.exists(p.Name, &dep) || !f.exists(p.Name, &sa) {
				return false, "no Deployment or ServiceAccount"
			}
			pod, acct := refNames(dep.Spec.Template.Spec.ImagePullSecrets), refNames(sa.ImagePullSecrets)
			return slices.Equal(pod, want) && slices.Equal(acct, want), "pod " + describeJSON(pod) + " serviceaccount " + describeJSON(acct)
		})
	}
	waitPullSecrets([]string{"ghcr-pull", "regcred"})
	// Converged, the pull Secrets cause no write (OF-4).
	time.Sleep(time.Second)
	before := f.operator.writes.writes.Load()
	label(t, f.cl, testutil.MakeGrant(p.Name).Obj(), "touched", "yes")
	time.Sleep(2 * time.Second)
	if n := f.operator.writes.writes.Load() - before; n != 0 {
		t.Errorf("steady-state reconciles with pull Secrets sent %d writes, want 0", n)
	}

	setPullSecrets := func(names []string) {
		t.Helper()
		var g v1alpha1.PluginGrant
		if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: p.Name}, &g); err != nil {
			t.Fatal(err)
		}
		g.Spec.ImagePullSecrets = names
		if err := f.cl.Update(context.Background(), &g); err != nil {
			t.Fatal(err)
		}
	}
	setPullSecrets([]string{"regcred"})
	waitPullSecrets([]string{"regcred"})
	setPullSecrets(nil)
	waitPullSecrets(nil)
}

// TestPullSecretsRejectedByTheAPI checks the CRD refuses what the domain
// refuses: a name that is no Secret name, a repeat and more than eight.
func TestPullSecretsRejectedByTheAPI(t *testing.T) {
	_, cl := testCluster(t)
	for name, secrets := range map[string][]string{
		"bad name": {"Reg_Cred"},
		"repeated": {"regcred", "regcred"},
		"too many": {"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"},
	} {
		g := testutil.MakeGrant("refused").Capabilities("connector").PullSecrets(secrets...).Obj()
		if err := cl.Create(context.Background(), g); err == nil {
			t.Errorf("%s: the API server accepted %v", name, secrets)
			_ = cl.Delete(context.Background(), g)
		}
	}
}
