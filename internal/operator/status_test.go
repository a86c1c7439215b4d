package operator

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

func TestTruncateMessage(t *testing.T) {
	for name, in := range map[string]string{
		"short":      "fine",
		"ascii":      strings.Repeat("a", 5000),
		"multi-byte": strings.Repeat("ż", 2000),
	} {
		t.Run(name, func(t *testing.T) {
			got := truncateMessage(in)
			if len(got) > MaxMessageBytes || !utf8.ValidString(got) {
				t.Fatalf("%d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
			if len(in) <= MaxMessageBytes && got != in {
				t.Errorf("a short message changed")
			}
			if len(in) > MaxMessageBytes && !strings.HasSuffix(got, "...") {
				t.Errorf("a cut message does not end in ...")
			}
		})
	}
}

// TestReadyReasons drives readyCondition through every reason of a pass
// that runs nothing, in the order the first cause wins.
func TestReadyReasons(t *testing.T) {
	current := &plugins.Version{Name: "fx"}
	tests := map[string]struct {
		pass pass
		want string
	}{
		"no grant":      {pass{name: "fx", plan: plugins.RolloutPlan{Outcome: plugins.RolloutNoGrant}}, v1alpha1.ReasonNoGrant},
		"invalid grant": {pass{plan: plugins.RolloutPlan{Outcome: plugins.RolloutInvalidGrant, Err: errors.New("grant.egress[0]: bad")}}, v1alpha1.ReasonInvalidGrant},
		"invalid previous version beats awaiting approval": {
			pass{current: current, previousErr: "refused", plan: plugins.RolloutPlan{Outcome: plugins.RolloutAwaitingApproval}},
			v1alpha1.ReasonInvalidPreviousVersion,
		},
		"awaiting approval": {pass{current: current, plan: plugins.RolloutPlan{Outcome: plugins.RolloutAwaitingApproval}}, v1alpha1.ReasonAwaitingApproval},
		"nothing granted":   {pass{current: current, plan: plugins.RolloutPlan{Outcome: plugins.RolloutNothingGranted}}, v1alpha1.ReasonNothingGranted},
		"not deployable: the check's own reason": {
			pass{notDeployable: condition{reason: v1alpha1.ReasonSignatureNotVerified}, plan: plugins.RolloutPlan{Outcome: plugins.RolloutNotDeployable}},
			v1alpha1.ReasonSignatureNotVerified,
		},
		"runs but the cluster is unavailable": {
			pass{clusterErr: errors.New("core service missing"), plan: plugins.RolloutPlan{Outcome: plugins.RolloutCurrent, Run: current}},
			v1alpha1.ReasonClusterUnavailable,
		},
		"runs, not yet available": {pass{plan: plugins.RolloutPlan{Outcome: plugins.RolloutCurrent, Run: current}}, v1alpha1.ReasonProgressing},
		"previous version that is the current one": {
			pass{available: true, previousIsCurrent: true, plan: plugins.RolloutPlan{Outcome: plugins.RolloutPrevious, Run: current}},
			v1alpha1.ReasonRunning,
		},
		"apply failed": {pass{applyErr: errors.New("boom"), plan: plugins.RolloutPlan{Outcome: plugins.RolloutCurrent, Run: current}}, v1alpha1.ReasonProgressing},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := readyCondition(&tc.pass); got.reason != tc.want {
				t.Errorf("reason %s (%s), want %s", got.reason, got.message, tc.want)
			}
		})
	}
}
