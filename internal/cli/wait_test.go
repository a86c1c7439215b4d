//go:build cluster

package cli

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

func TestWait(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	ref := im.signed(t, "fx-wait", plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}})
	expect(t, openfief(t, k, runOpts{}, "plugin", "install", "fx-wait", "--image", ref.String(), "--signers", im.signers), ExitOK)
	t.Cleanup(func() { openfief(t, k, runOpts{}, "plugin", "uninstall", "fx-wait", "--yes") })

	t.Run("no --for", func(t *testing.T) {
		expect(t, openfief(t, k, runOpts{}, "plugin", "wait", "fx-wait"), ExitUsage, "--for is required")
	})
	t.Run("unknown plugin", func(t *testing.T) {
		expect(t, openfief(t, k, runOpts{}, "plugin", "wait", "fx-nobody", "--for", "Running"), ExitNotFound, `plugin "fx-nobody" not found`)
	})
	t.Run("times out naming what it saw", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "wait", "fx-wait", "--for", "Running", "--timeout", "500ms")
		expect(t, r, ExitFailure, `did not reach Running within 500ms; last seen no status yet`)
	})
	t.Run("reaches the reason the operator wrote", func(t *testing.T) {
		go func() {
			time.Sleep(300 * time.Millisecond)
			p := k.plugin(t, "fx-wait")
			p.Status.ObservedGeneration = p.Generation
			p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: v1alpha1.ReasonNoGrant, Message: "no grant", LastTransitionTime: metav1.Now(), ObservedGeneration: p.Generation}}
			if err := k.c.Status().Update(context.Background(), p); err != nil {
				t.Error(err)
			}
		}()
		r := openfief(t, k, runOpts{}, "plugin", "wait", "fx-wait", "--for", "NoGrant", "--timeout", "20s")
		expect(t, r, ExitOK, "fx-wait: Ready=False (NoGrant)")
	})
}
