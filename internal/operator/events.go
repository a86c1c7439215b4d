package operator

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// EventReportingController is the reportingController of the operator's
// Events (events.k8s.io/v1); eventWriter appends "-" and the host name for
// the reportingInstance, as client-go's recorder does.
const EventReportingController = "openfief-operator"

// Reasons of the Events the operator records on a Plugin, so that `kubectl
// describe plugin` tells what it decided. Each is recorded once,
// by the pass whose status write changes what the Event reports
// (pluginEvents); a pass that writes no status records nothing. Notes come
// from the condition messages and image references: never a token, Secret
// content or config value.
const (
	// EventImageVerified (Normal): the current spec's image passed the check
	// (D-57), first or for a new spec generation; the note starts with
	// SignatureVerified's reason, Verified or SignedByTrustedSigner.
	EventImageVerified = "ImageVerified"
	// EventImageRefused (Warning): the current spec's image is refused; the
	// note starts with SignatureVerified's reason (Unsigned, UntrustedSigner,
	// ManifestMismatch or InvalidImage).
	EventImageRefused = "ImageRefused"
	// EventRegistryUnavailable (Warning): the current spec's image could not
	// be read from its registry; a version the operator verified keeps
	// running (OF-2).
	EventRegistryUnavailable = "RegistryUnavailable"
	// EventRegistryUnauthorized (Warning): the registry refused to let the
	// current spec's image be read (401, 403); handled as
	// EventRegistryUnavailable: a version the operator verified keeps
	// running (OF-2), nothing new deploys.
	EventRegistryUnauthorized = "RegistryUnauthorized"
	// EventRolledOut (Normal): a new version was applied (status.deployed
	// names another record): an install, an approved upgrade, a config change.
	EventRolledOut = "RolledOut"
	// EventRolledBack (Normal): instead of EventRolledOut, when the version
	// applied runs an image an older revision of status.history ran: the
	// owner rolled back ('openfief plugin rollback'), and the image was
	// verified and approved again like any upgrade. The note names both
	// revisions and the image.
	EventRolledBack = "RolledBack"
	// EventKeptPreviousVersion: the previous version keeps running while the
	// current spec cannot (D-47); Normal when the spec waits for approval,
	// Warning when it is refused or invalid.
	EventKeptPreviousVersion = "KeptPreviousVersion"
	// EventRevoked (Normal): the PluginGrant is gone, so what ran was torn
	// down (D-16).
	EventRevoked = "Revoked"
	// EventStopped (Warning): what ran was torn down for another reason than
	// a revoked grant; the note starts with Ready's reason.
	EventStopped = "Stopped"
	// EventNotRunning: nothing ran and nothing runs, for a new Ready reason or
	// a new spec generation; Normal while waiting for the owner (NoGrant,
	// AwaitingApproval), Warning otherwise. A refused image is told by
	// EventImageRefused, EventRegistryUnavailable or EventRegistryUnauthorized
	// alone.
	EventNotRunning = "NotRunning"
	// EventParked (Warning): Ready became ClusterUnavailable: nothing runs,
	// the Deployment is scaled to zero with its record (OF-2).
	EventParked = "Parked"
	// EventResumed (Normal): Ready left ClusterUnavailable and the parked
	// version runs again.
	EventResumed = "Resumed"
)

// Actions of the operator's Events (events.k8s.io/v1 requires one).
const (
	actionVerify   = "Verify"
	actionDeploy   = "Deploy"
	actionTearDown = "TearDown"
	actionPark     = "Park"
)

// pluginEvent is one Event to record on a Plugin.
type pluginEvent struct {
	Type, Reason, Action, Note string
}

// keptPrevious is why the previous version keeps running instead of the
// current spec; a pass says it, its status does not.
type keptPrevious struct {
	why              string
	waitsForApproval bool
}

// keptPrevious reports whether the previous version keeps running while the
// current spec does not (nil when not).
func (p *pass) keptPrevious() *keptPrevious {
	if p.plan.Outcome != plugins.RolloutPrevious || p.previousIsCurrent || p.clusterErr != nil {
		return nil
	}
	return &keptPrevious{why: p.whyNotCurrent(), waitsForApproval: p.current != nil && p.deployable && !p.plan.Pending.IsEmpty()}
}

// recordEvents records the Events of a status write that took prev to
// p.Status. It is called only after the write succeeded, so a failed or
// conflicting write records nothing and its retry records them once.
func (r *PluginReconciler) recordEvents(p *v1alpha1.Plugin, prev *v1alpha1.PluginStatus, ps *pass) {
	if r.Recorder == nil {
		return
	}
	for _, e := range pluginEvents(prev, &p.Status, ps.keptPrevious(), ps.applyErr != nil) {
		r.Recorder.Eventf(p, nil, e.Type, e.Reason, e.Action, "%s", truncateMessage(e.Note))
	}
}

// pluginEvents lists the Events of a status change from prev to next, in the
// order a reader follows them: the image check, then what runs. kept is the
// pass's keptPrevious, applyFailed whether its apply failed. Each Event
// compares only what it reports, so an unchanged status gives none:
//
//	event                 when
//	ImageVerified         SignatureVerified True, and its status, reason or observed generation changed
//	ImageRefused          SignatureVerified False, likewise
//	RegistryUnavailable   SignatureVerified Unknown/RegistryUnavailable, likewise
//	RegistryUnauthorized  SignatureVerified Unknown/RegistryUnauthorized, likewise
//	RolledOut             status.deployed names another record than before
//	RolledBack            instead of RolledOut, when status.history's new revision runs an older revision's image
//	KeptPreviousVersion   kept, and the generation, status.deployed, pendingApproval or the check's outcome changed
//	Resumed               Ready left ClusterUnavailable for a running reason, the same record runs, and the apply succeeded
//	Parked                Ready became ClusterUnavailable
//	Revoked               status.deployed went away with Ready NoGrant
//	Stopped               status.deployed went away for another reason
//	NotRunning            nothing ran or runs, Ready's reason or the generation changed; not for SignatureNotVerified
//
// status.deployed is compared only to tell when to speak, never trusted for
// what runs (OF-2): someone who forges it makes at most one more RolledOut,
// naming the version that really runs.
func pluginEvents(prev, next *v1alpha1.PluginStatus, kept *keptPrevious, applyFailed bool) []pluginEvent {
	var out []pluginEvent
	if e, ok := signatureEvent(prev, next); ok {
		out = append(out, e)
	}
	if next.Deployed != nil && !equality.Semantic.DeepEqual(prev.Deployed, next.Deployed) {
		if from, to := rolledBack(prev, next); from != nil {
			out = append(out, pluginEvent{corev1.EventTypeNormal, EventRolledBack, actionDeploy, describeRollback(from, to)})
		} else {
			out = append(out, pluginEvent{corev1.EventTypeNormal, EventRolledOut, actionDeploy, "rolled out " + describeRecord(next.Deployed)})
		}
	}
	if kept != nil && keptChanged(prev, next) {
		typ := corev1.EventTypeWarning
		if kept.waitsForApproval {
			typ = corev1.EventTypeNormal
		}
		out = append(out, pluginEvent{typ, EventKeptPreviousVersion, actionDeploy, "keeps running " + deployedImage(next) + ": " + kept.why})
	}
	ready0, ready1 := readyOf(prev), readyOf(next)
	switch {
	case ready1.Reason == v1alpha1.ReasonClusterUnavailable:
		if ready0.Reason != v1alpha1.ReasonClusterUnavailable {
			what := "nothing runs"
			if next.Deployed != nil {
				what = next.Deployed.Image + " is parked at zero replicas and resumes when the Services are usable again"
			}
			out = append(out, pluginEvent{corev1.EventTypeWarning, EventParked, actionPark, ready1.Message + "; " + what})
		}
	case ready0.Reason == v1alpha1.ReasonClusterUnavailable && runningReason(ready1.Reason) && !applyFailed &&
		next.Deployed != nil && equality.Semantic.DeepEqual(prev.Deployed, next.Deployed):
		out = append(out, pluginEvent{corev1.EventTypeNormal, EventResumed, actionDeploy,
			"the core's and the proxy's Services are usable again; " + next.Deployed.Image + " runs again"})
	case next.Deployed == nil && prev.Deployed != nil && ready1.Reason == v1alpha1.ReasonNoGrant:
		out = append(out, pluginEvent{corev1.EventTypeNormal, EventRevoked, actionTearDown,
			prev.Deployed.Image + " was torn down: " + ready1.Message})
	case next.Deployed == nil && prev.Deployed != nil && !runningReason(ready1.Reason):
		out = append(out, pluginEvent{corev1.EventTypeWarning, EventStopped, actionTearDown,
			prev.Deployed.Image + " was torn down: " + ready1.Reason + ": " + ready1.Message})
	case next.Deployed == nil && prev.Deployed == nil && ready1.Reason != "" && !runningReason(ready1.Reason) &&
		ready1.Reason != v1alpha1.ReasonSignatureNotVerified &&
		(ready0.Reason != ready1.Reason || prev.ObservedGeneration != next.ObservedGeneration):
		typ := corev1.EventTypeWarning
		if ready1.Reason == v1alpha1.ReasonNoGrant || ready1.Reason == v1alpha1.ReasonAwaitingApproval {
			typ = corev1.EventTypeNormal
		}
		out = append(out, pluginEvent{typ, EventNotRunning, actionTearDown, ready1.Reason + ": " + ready1.Message})
	}
	return out
}

// signatureEvent is the Event of SignatureVerified, when its status, reason
// or observed generation (a new spec was checked) changed. A spec too invalid
// to check (Unknown/InvalidSpec) gives none: Ready tells it.
func signatureEvent(prev, next *v1alpha1.PluginStatus) (pluginEvent, bool) {
	c := apimeta.FindStatusCondition(next.Conditions, v1alpha1.ConditionSignatureVerified)
	if c == nil {
		return pluginEvent{}, false
	}
	if o := apimeta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionSignatureVerified); o != nil &&
		o.Status == c.Status && o.Reason == c.Reason && o.ObservedGeneration == c.ObservedGeneration {
		return pluginEvent{}, false
	}
	note := c.Reason + ": " + c.Message
	switch {
	case c.Status == metav1.ConditionTrue:
		return pluginEvent{corev1.EventTypeNormal, EventImageVerified, actionVerify, note}, true
	case c.Status == metav1.ConditionFalse:
		return pluginEvent{corev1.EventTypeWarning, EventImageRefused, actionVerify, note}, true
	case c.Reason == v1alpha1.ReasonRegistryUnavailable:
		return pluginEvent{corev1.EventTypeWarning, EventRegistryUnavailable, actionVerify, c.Message}, true
	case c.Reason == v1alpha1.ReasonRegistryUnauthorized:
		return pluginEvent{corev1.EventTypeWarning, EventRegistryUnauthorized, actionVerify, c.Message}, true
	}
	return pluginEvent{}, false
}

// keptChanged reports whether what KeptPreviousVersion reports differs
// between prev and next: the spec generation, the running record, what is
// pending and the check's outcome. Ready's own flip from Progressing to
// RunningPreviousVersion is no news.
func keptChanged(prev, next *v1alpha1.PluginStatus) bool {
	sig := func(s *v1alpha1.PluginStatus) (metav1.ConditionStatus, string) {
		if c := apimeta.FindStatusCondition(s.Conditions, v1alpha1.ConditionSignatureVerified); c != nil {
			return c.Status, c.Reason
		}
		return "", ""
	}
	status0, reason0 := sig(prev)
	status1, reason1 := sig(next)
	return prev.ObservedGeneration != next.ObservedGeneration || status0 != status1 || reason0 != reason1 ||
		!equality.Semantic.DeepEqual(prev.Deployed, next.Deployed) ||
		!equality.Semantic.DeepEqual(prev.PendingApproval, next.PendingApproval)
}

// readyOf is s's Ready condition, empty without one.
func readyOf(s *v1alpha1.PluginStatus) metav1.Condition {
	if c := apimeta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// runningReason reports whether Ready's reason says a version runs or starts.
func runningReason(reason string) bool {
	switch reason {
	case v1alpha1.ReasonRunning, v1alpha1.ReasonRunningPreviousVersion, v1alpha1.ReasonProgressing:
		return true
	}
	return false
}

// deployedImage is the image status.deployed names, "the previous version"
// without one.
func deployedImage(s *v1alpha1.PluginStatus) string {
	if s.Deployed == nil || s.Deployed.Image == "" {
		return "the previous version"
	}
	return s.Deployed.Image
}

// describeRecord names a record's image and how it verified; never its
// config.
func describeRecord(d *v1alpha1.DeployedVersion) string {
	s := d.Image
	switch {
	case d.Trust != "" && d.Signer != "":
		s += " (" + d.Trust + ", signer " + d.Signer + ")"
	case d.Trust != "":
		s += " (" + d.Trust + ")"
	}
	return s
}
