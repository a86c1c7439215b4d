package core

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

func TestTargetOf(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason}}
	}
	connector := &v1alpha1.EffectivePermissions{Capabilities: []v1alpha1.Capability{"connector"}, DataTiers: []string{"z", "accounts"}}
	view := &v1alpha1.EffectivePermissions{Capabilities: []v1alpha1.Capability{"view"}}
	now := metav1.Now()
	for name, tc := range map[string]struct {
		status  v1alpha1.PluginStatus
		deleted bool
		labels  map[string]string
		want    Target
		ok      bool
	}{
		"running connector":        {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, v1alpha1.ReasonRunning), Effective: connector}, ok: true, want: Target{Instance: "p", Connector: true, DataTiers: []string{"accounts", "z"}}},
		"previous version runs":    {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, v1alpha1.ReasonRunningPreviousVersion), Effective: connector}, ok: true, want: Target{Instance: "p", Connector: true, DataTiers: []string{"accounts", "z"}}},
		"running view":             {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, v1alpha1.ReasonRunning), Effective: view}, ok: true, want: Target{Instance: "p", View: true}},
		"no grant":                 {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionFalse, v1alpha1.ReasonNoGrant), Effective: connector}},
		"progressing":              {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionFalse, v1alpha1.ReasonProgressing), Effective: connector}},
		"ready with an odd reason": {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, "Other"), Effective: connector}},
		"no effective permissions": {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, v1alpha1.ReasonRunning)}},
		"not reconciled yet":       {},
		// OF-29: the check's probes are views the core never calls, and the
		// label can only take calls away.
		"check probe (view)":      {labels: map[string]string{plugins.LabelCheckRun: "r1"}, status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, v1alpha1.ReasonRunning), Effective: view}, ok: true, want: Target{Instance: "p"}},
		"check probe (connector)": {labels: map[string]string{plugins.LabelCheckRun: "r1"}, status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, v1alpha1.ReasonRunning), Effective: connector}, ok: true, want: Target{Instance: "p", DataTiers: []string{"accounts", "z"}}},
		"being deleted":           {status: v1alpha1.PluginStatus{Conditions: ready(metav1.ConditionTrue, v1alpha1.ReasonRunning), Effective: connector}, deleted: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: tc.labels}, Status: tc.status}
			if tc.deleted {
				p.DeletionTimestamp = &now
			}
			got, ok := TargetOf(p)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
