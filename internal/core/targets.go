package core

import (
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Target is a plugin instance that runs under a grant now, as its Plugin's
// status tells: what the core may call and whose calls it accepts.
type Target struct {
	// Instance is the Plugin's name.
	Instance string
	// UID is the Plugin's UID: with the name, the instance's identity
	// (OF-38). A Plugin deleted and created again under the same name is
	// another instance. Empty only for targets made without an API server
	// (tests): the scheduler then claims nothing.
	UID string
	// Connector is true when the running version holds the connector
	// capability: only then does the core call Sync and ImportFile (D-49).
	Connector bool
	// View is true when the running version holds the view capability:
	// only then does the core send it the record (OF-35).
	View bool
	// DataTiers are the running version's effective data tiers, sorted
	// (OF-11).
	DataTiers []string
}

// TargetOf reads a Plugin's status: it is a target when its Ready condition
// is True for the current generation's status (Running, or
// RunningPreviousVersion while an upgrade waits for approval) and the status
// names what the running version holds. A Plugin being deleted, without a
// grant, or not yet reconciled is not. A Plugin labelled
// plugins.LabelCheckRun (a probe of `openfief check --isolation`, OF-29) is
// a target the core calls for nothing.
func TargetOf(p *v1alpha1.Plugin) (Target, bool) {
	if p.DeletionTimestamp != nil || p.Status.Effective == nil {
		return Target{}, false
	}
	ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		return Target{}, false
	}
	switch ready.Reason {
	case v1alpha1.ReasonRunning, v1alpha1.ReasonRunningPreviousVersion:
	default:
		return Target{}, false
	}
	if _, probe := p.Labels[plugins.LabelCheckRun]; probe {
		// The check's probes (OF-29) are never called: no Sync, no pages
		// of the record. The label only ever takes calls away.
		return Target{Instance: p.Name, UID: string(p.UID), DataTiers: slices.Sorted(slices.Values(p.Status.Effective.DataTiers))}, true
	}
	t := Target{
		Instance:  p.Name,
		UID:       string(p.UID),
		Connector: slices.Contains(p.Status.Effective.Capabilities, v1alpha1.Capability(plugins.CapabilityConnector)),
		View:      slices.Contains(p.Status.Effective.Capabilities, v1alpha1.Capability(plugins.CapabilityView)),
		DataTiers: slices.Sorted(slices.Values(p.Status.Effective.DataTiers)),
	}
	return t, true
}
