package operator

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// A plugin's history (status.history) lists the versions the operator
// verified and ran, newest first, so that the owner can see them and go
// back to one ('openfief plugin rollback', which changes spec.image: the
// image is then verified and approved like any upgrade, D-47).

// nextHistory is the history after a pass whose status reports deployed as
// the version that runs (nil: nothing runs). A new revision is recorded
// when deployed names another image than the newest revision, first run
// when its record was stamped (its verifiedAt: the second the operator
// started it; now without one); the newest one then gets that time as its
// lastRan. A plugin that ran before the history existed thus gets, on the
// first pass of an operator that keeps it, one revision dated when it
// started. Anything else (the same image
// again, a change of config, nothing running) leaves the history as it
// was, so a steady state writes nothing. The result is at most
// v1alpha1.MaxPluginHistory long, newest first, with revision numbers that
// only grow; old is never modified.
func nextHistory(old []v1alpha1.PluginRevision, deployed *v1alpha1.DeployedVersion, now time.Time) []v1alpha1.PluginRevision {
	old = boundedHistory(old)
	if deployed == nil || deployed.Image == "" || (len(old) > 0 && old[0].Image == deployed.Image) {
		return old
	}
	stamp := metav1.Time{Time: now.UTC().Truncate(time.Second)}
	if deployed.VerifiedAt != nil && !deployed.VerifiedAt.IsZero() {
		stamp = metav1.Time{Time: deployed.VerifiedAt.UTC().Truncate(time.Second)}
	}
	var revision int64 = 1
	if len(old) > 0 {
		revision = old[0].Revision + 1
	}
	rev := v1alpha1.PluginRevision{
		Revision:       revision,
		Image:          deployed.Image,
		ManifestDigest: plugins.ManifestDigest(apiconv.ManifestFromAPI(deployed.Manifest)),
		Signer:         deployed.Signer,
		Trust:          deployed.Trust,
		FirstRan:       stamp,
	}
	next := make([]v1alpha1.PluginRevision, 0, v1alpha1.MaxPluginHistory)
	next = append(next, rev)
	for i, r := range old {
		if len(next) == v1alpha1.MaxPluginHistory {
			break
		}
		r = *r.DeepCopy()
		if i == 0 && r.LastRan == nil {
			r.LastRan = stamp.DeepCopy()
		}
		next = append(next, r)
	}
	return next
}

// rolledBack reports a rollback between two statuses: next records a new
// revision whose image an older revision of prev's history ran. from is
// that older revision, to the new one; both nil when next records no new
// revision or its image is new.
func rolledBack(prev, next *v1alpha1.PluginStatus) (from, to *v1alpha1.PluginRevision) {
	if len(next.History) == 0 || (len(prev.History) > 0 && prev.History[0].Revision == next.History[0].Revision) {
		return nil, nil
	}
	to = &next.History[0]
	for i := range prev.History {
		if prev.History[i].Image == to.Image {
			return &prev.History[i], to
		}
	}
	return nil, nil
}

// boundedHistory is h cut to v1alpha1.MaxPluginHistory entries (the CRD
// allows no more; an older API server's status might), newest first.
func boundedHistory(h []v1alpha1.PluginRevision) []v1alpha1.PluginRevision {
	if len(h) > v1alpha1.MaxPluginHistory {
		return h[:v1alpha1.MaxPluginHistory]
	}
	return h
}

// describeRollback is the note of EventRolledBack: the revision whose image
// runs again and the revision that records it now.
func describeRollback(from, to *v1alpha1.PluginRevision) string {
	return "rolled back to the image of revision " + strconv.FormatInt(from.Revision, 10) + ", " + to.Image +
		", now revision " + strconv.FormatInt(to.Revision, 10)
}
