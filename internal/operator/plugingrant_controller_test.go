//go:build cluster

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestGrantValidWrittenOnlyOnChange: the grant reconciler says on the grant
// whether it is valid, writes once when that changes (an IP literal the
// CRD lets through and the domain refuses, D-32) and not at all when a
// reconcile changes nothing. No Plugin of the grant's name exists, so the
// Plugin reconciler has nothing to write either.
func TestGrantValidWrittenOnlyOnChange(t *testing.T) {
	f := newFixture(t)
	g := testutil.MakeGrant("grant-valid").Egress("api.nbp.pl").Obj()
	f.create(g)
	f.waitGrantCondition(g.Name, metav1.ConditionTrue, v1alpha1.ReasonValid)
	f.waitWritesSettle() // the first passes' writes, the operator's start's too

	before := f.operator.writes.writes.Load()
	label(t, f.cl, g.DeepCopy(), "touched", "yes")
	time.Sleep(2 * time.Second)
	if n := f.operator.writes.writes.Load() - before; n != 0 {
		t.Errorf("a reconcile that changed nothing sent %d writes, want 0", n)
	}

	before = f.operator.writes.writes.Load()
	update(t, f.cl, g.DeepCopy(), func(g *v1alpha1.PluginGrant) { g.Spec.Egress = []v1alpha1.EgressHost{"192.0.2.1"} })
	c := f.waitGrantCondition(g.Name, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
	if !strings.Contains(c.Message, "grant.egress[0]") {
		t.Errorf("Valid=False says %q, want the field grant.egress[0]", c.Message)
	}
	time.Sleep(2 * time.Second)
	if n := f.operator.writes.writes.Load() - before; n != 1 {
		t.Errorf("the change to an invalid grant sent %d writes, want 1 (its status)", n)
	}
}

// waitGrantCondition waits until grant name's Valid condition has status
// and reason at the grant's generation, and returns it.
func (f *fixture) waitGrantCondition(name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	f.t.Helper()
	var got metav1.Condition
	testutil.Eventually(f.t, waitTimeout, name+" grant Valid="+string(status), func() (bool, string) {
		var g v1alpha1.PluginGrant
		if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: plugins.Namespace, Name: name}, &g); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionValid)
		if c == nil || g.Status.ObservedGeneration != g.Generation || c.ObservedGeneration != g.Generation {
			return false, describeJSON(g.Status)
		}
		got = *c
		return c.Status == status && c.Reason == reason, describeJSON(g.Status)
	})
	return got
}

// waitWritesSettle waits until the operator has sent no write for a second
// (its start and first passes write the allow-list, the status ConfigMaps
// and the first statuses, later on a loaded machine), within waitTimeout.
func (f *fixture) waitWritesSettle() {
	f.t.Helper()
	last, since := f.operator.writes.writes.Load(), time.Now()
	testutil.Eventually(f.t, waitTimeout, "the operator's writes settling", func() (bool, string) {
		if n := f.operator.writes.writes.Load(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= time.Second, fmt.Sprintf("%d writes, the last %s ago", last, time.Since(since).Round(time.Millisecond))
	})
}
