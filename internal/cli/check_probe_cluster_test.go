//go:build cluster

package cli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestCheckIsolationRefusesAGreedyProbe: a probe image signed by a trusted
// signer whose label asks for more than this CLI's probe manifest
// (connector and view, the accounts tier, the Secret ibkr-flex-credentials,
// another host) is refused before anything is created: approved, such a
// probe would be a view with the owner's Secret and every account. A watcher lists the check's Plugins and PluginGrants all along, so a
// run that created them and cleaned them up again is caught too.
func TestCheckIsolationRefusesAGreedyProbe(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	k.createSecret(t, "ibkr-flex-credentials")
	greedy := im.signed(t, "plugins/check-probe-greedy", greedyProbe)

	var errOut bytes.Buffer
	env := NewEnv(Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errOut})
	env.Kubeconfig = k.kubeconfig
	env.Namespace = plugins.Namespace

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var (
		mu   sync.Mutex
		seen []string
		done = make(chan struct{})
	)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	go func() {
		defer close(done)
		for watchCtx.Err() == nil {
			var ps v1alpha1.PluginList
			var gs v1alpha1.PluginGrantList
			if k.c.List(watchCtx, &ps, client.InNamespace(plugins.Namespace), client.HasLabels{LabelCheckRun}) == nil &&
				k.c.List(watchCtx, &gs, client.InNamespace(plugins.Namespace), client.HasLabels{LabelCheckRun}) == nil {
				mu.Lock()
				for _, p := range ps.Items {
					seen = append(seen, "Plugin "+p.Name)
				}
				for _, g := range gs.Items {
					seen = append(seen, "PluginGrant "+g.Name+" granting "+asksForGrant(g))
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	_, err := env.isolation(ctx, isolationOptions{probeImage: greedy.String(), settle: time.Second, trust: trustFlags{signersFile: im.signers}})
	stopWatch()
	<-done
	t.Logf("check --isolation --probe-image (greedy label): %v\n%s", err, errOut.String())
	if ExitCode(err) != ExitManifestMismatch || !strings.Contains(err.Error(), "nothing was created") {
		t.Errorf("check --isolation with a greedy probe: %v (exit %d), want exit %d, refused", err, ExitCode(err), ExitManifestMismatch)
	}
	if len(seen) > 0 {
		t.Errorf("the check created objects for a probe asking for more than its manifest: %s", strings.Join(unique(seen), "; "))
	}
}

// asksForGrant sums up what a PluginGrant grants, for the failure message.
func asksForGrant(g v1alpha1.PluginGrant) string {
	var b strings.Builder
	for _, c := range g.Spec.Capabilities {
		b.WriteString(string(c) + " ")
	}
	for _, s := range g.Spec.Secrets {
		b.WriteString("secret " + s.Name + " ")
	}
	for _, e := range g.Spec.Egress {
		b.WriteString("egress " + string(e) + " ")
	}
	for _, d := range g.Spec.DataTiers {
		b.WriteString("tier " + string(d) + " ")
	}
	return strings.TrimSpace(b.String())
}

func unique(s []string) []string {
	var out []string
	have := map[string]bool{}
	for _, v := range s {
		if !have[v] {
			have[v] = true
			out = append(out, v)
		}
	}
	return out
}
