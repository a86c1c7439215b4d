package operator

import (
	"context"
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// MaxMessageBytes caps a condition message; longer ones are cut on a rune
// boundary and end in "...".
const MaxMessageBytes = 1024

// truncateMessage caps s at MaxMessageBytes bytes of valid UTF-8.
func truncateMessage(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	const ellipsis = "..."
	cut := MaxMessageBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// condition is one status line before it is stamped with the generation.
type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

// setCondition writes c into conds, keeping lastTransitionTime when the
// status did not change, so an unchanged pass leaves the status unchanged.
func setCondition(conds *[]metav1.Condition, typ string, c condition, generation int64) {
	apimeta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             c.status,
		Reason:             c.reason,
		Message:            truncateMessage(c.message),
		ObservedGeneration: generation,
	})
}

// writeStatusIfChanged is how the Plugin and PluginGrant reconcilers write
// status, once at the end of a pass: when next differs from *status (obj's
// own status field, as read), it sets *status to next and patches obj's
// status subresource with an optimistic lock, so a pass that read a stale
// object fails and retries instead of overwriting a newer status. An
// unchanged pass writes nothing. It reports whether it wrote.
func writeStatusIfChanged[S any](ctx context.Context, c client.Client, obj client.Object, status, next *S) (bool, error) {
	if equality.Semantic.DeepEqual(status, next) {
		return false, nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	*status = *next
	if err := c.Status().Patch(ctx, obj, patch); err != nil {
		return false, err
	}
	return true, nil
}

// approvalCondition says what the current spec requests beyond the grant.
// Sets ApprovalRequired: Unknown/InvalidSpec without a valid current
// version, True/PermissionsPending with what is pending, else
// False/NothingPending.
func approvalCondition(current *plugins.Version, pending plugins.Pending) condition {
	switch {
	case current == nil:
		return condition{metav1.ConditionUnknown, v1alpha1.ReasonInvalidSpec, "the spec is invalid, so what it requests is unknown"}
	case !pending.IsEmpty():
		return condition{metav1.ConditionTrue, v1alpha1.ReasonPermissionsPending, "pending approval: " + pending.String()}
	default:
		return condition{metav1.ConditionFalse, v1alpha1.ReasonNothingPending, "the grant approves everything the spec requests"}
	}
}

// readyCondition gives Ready's first cause, in the order of the reasons in
// api/v1alpha1: what runs, then why nothing runs.
func readyCondition(pass *pass) condition {
	if pass.applyErr != nil {
		return condition{metav1.ConditionFalse, v1alpha1.ReasonProgressing, "applying the workload failed, retrying: " + pass.applyErr.Error()}
	}
	if pass.plan.Outcome.Runs() {
		switch {
		case pass.clusterErr != nil:
			return condition{metav1.ConditionFalse, v1alpha1.ReasonClusterUnavailable, pass.clusterErr.Error()}
		case !pass.available:
			return condition{metav1.ConditionFalse, v1alpha1.ReasonProgressing, "waiting for the Deployment to become available"}
		case pass.plan.Outcome == plugins.RolloutPrevious && !pass.previousIsCurrent:
			return condition{metav1.ConditionTrue, v1alpha1.ReasonRunningPreviousVersion,
				"the previous version runs under the current grant; " + pass.whyNotCurrent()}
		default:
			return condition{metav1.ConditionTrue, v1alpha1.ReasonRunning, "running " + pass.plan.Run.Image.String()}
		}
	}
	errText := func(fallback string) string {
		if pass.plan.Err != nil {
			return pass.plan.Err.Error()
		}
		return fallback
	}
	switch pass.plan.Outcome {
	case plugins.RolloutNoGrant:
		return condition{metav1.ConditionFalse, v1alpha1.ReasonNoGrant, "no PluginGrant named " + pass.name + "; nothing runs"}
	case plugins.RolloutInvalidGrant:
		return condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidGrant, errText("the PluginGrant is invalid")}
	}
	if pass.previousErr != "" {
		return condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidPreviousVersion, pass.previousErr + "; " + pass.whyNotCurrent()}
	}
	switch pass.plan.Outcome {
	case plugins.RolloutAwaitingApproval:
		return condition{metav1.ConditionFalse, v1alpha1.ReasonAwaitingApproval, "waiting for approval of " + pass.plan.Pending.String()}
	case plugins.RolloutNothingGranted:
		return condition{metav1.ConditionFalse, v1alpha1.ReasonNothingGranted, errText("no requested capability is granted")}
	}
	return pass.notDeployable
}

// writeStatus computes the new status and patches it only when it differs
// from what the cache holds (OF-4); once the patch succeeds, it records the
// Events of the change (recordEvents), so a steady state records none.
func (r *PluginReconciler) writeStatus(ctx context.Context, p *v1alpha1.Plugin, ps *pass) error {
	next := p.Status.DeepCopy()
	next.ObservedGeneration = p.Generation
	setCondition(&next.Conditions, v1alpha1.ConditionSignatureVerified, ps.signature, p.Generation)
	setCondition(&next.Conditions, v1alpha1.ConditionApprovalRequired, approvalCondition(ps.current, ps.plan.Pending), p.Generation)
	setCondition(&next.Conditions, v1alpha1.ConditionReady, readyCondition(ps), p.Generation)
	next.PendingApproval = apiconv.PendingToAPI(ps.plan.Pending)
	next.Effective = nil
	// status.deployed reports the record on the Deployment; nothing reads
	// it back (OF-2).
	switch {
	case ps.applyErr != nil:
		// The Deployment still carries the record it had.
		next.Effective = p.Status.Effective
		next.Deployed = ps.running.report()
	case ps.plan.Outcome.Runs() && ps.clusterErr == nil:
		next.Effective = apiconv.EffectiveToAPI(ps.plan.Effective)
		next.Deployed = ps.deployed.DeepCopy()
	case ps.plan.Outcome.Runs():
		// ClusterUnavailable: the parked Deployment keeps its record.
		next.Deployed = ps.running.report()
	default:
		next.Deployed = nil
	}
	next.History = nextHistory(p.Status.History, next.Deployed, r.now())
	prev := p.Status
	wrote, err := writeStatusIfChanged(ctx, r.Client, p, &p.Status, next)
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if !wrote {
		return nil
	}
	r.recordEvents(p, &prev, ps)
	ctrllog.FromContext(ctx).V(1).Info("status written", "ready", readyCondition(ps).reason)
	return nil
}
