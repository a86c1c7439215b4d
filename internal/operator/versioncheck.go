package operator

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/configschema"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// The checks of one Plugin reconcile (Reconcile) before it plans: the
// current spec (valid, its config matching its schema, its image signed by a
// trusted signer, D-57), then the version that runs, checked again before it
// may keep running (OF-2). Where the running version's record comes from is
// verified.go.

// checkCurrent validates the spec and its config and checks its image. It
// sets SignatureVerified and decides whether the current version is
// deployable: valid spec, config matching its schema, and a True signature
// check (D-57).
func (r *PluginReconciler) checkCurrent(ctx context.Context, p *v1alpha1.Plugin, ps *pass) {
	dp := apiconv.PluginFromAPI(p)
	ref, refErr := plugins.ParseImageRef(dp.Image)
	if err := dp.Validate(); err != nil {
		ps.notDeployable = condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, err.Error()}
		if refErr != nil {
			ps.signature = condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidImage, refErr.Error()}
		} else {
			ps.signature = condition{metav1.ConditionUnknown, v1alpha1.ReasonInvalidSpec, "not checked: the spec is invalid"}
		}
		return
	}
	ps.current = &plugins.Version{Name: dp.Name, Image: ref, Manifest: dp.Manifest, Config: dp.Config}

	v := r.Images.Check(ctx, ref, &dp.Manifest)
	if v.Status == metav1.ConditionUnknown {
		v.Message += fmt.Sprintf("; retrying every %s", r.registryRetry())
	}
	ps.verification = v
	ps.signature = condition{v.Status, v.Reason, v.Message}
	if v.Status == metav1.ConditionUnknown {
		ps.requeue = r.registryRetry()
		if rec := ps.running.trusted(); sameAsDeployed(ps.current, rec) {
			// Fail static (OF-2): the operator verified this exact
			// version and runs it; an unreachable registry does not stop it.
			ps.verification.Status, ps.verification.Signer = metav1.ConditionTrue, rec.Signer
			ps.signature.message += fmt.Sprintf("; the running version was verified at %s and keeps running", verifiedAt(rec))
		}
	}
	if err := configschema.Validate(dp.Manifest.ConfigSchema, dp.Config); err != nil {
		ps.notDeployable = condition{metav1.ConditionFalse, v1alpha1.ReasonInvalidConfig, err.Error()}
		return
	}
	if !ps.verification.Verified() {
		ps.notDeployable = condition{metav1.ConditionFalse, v1alpha1.ReasonSignatureNotVerified, v.Message}
		return
	}
	ps.deployable = true
}

// checkPrevious checks the image of the version that runs (ps.running) again
// before it may keep running. An unreachable registry keeps it, since the
// operator verified it when it deployed it (OF-2), unless the record is a
// legacy one; a definite refusal drops it.
func (r *PluginReconciler) checkPrevious(ctx context.Context, ps *pass) {
	if ps.running == nil {
		return
	}
	d := ps.running.rec
	ref, err := plugins.ParseImageRef(d.Image)
	prev := plugins.Version{Name: ps.name, Image: ref, Manifest: apiconv.ManifestFromAPI(d.Manifest), Config: apiconv.RawJSON(d.Config)}
	if err == nil {
		err = prev.Manifest.Validate()
	}
	if err != nil {
		ps.previousErr = "the record of the running version is invalid: " + err.Error()
		return
	}
	// The same version as the current spec was checked a moment ago.
	v := ps.verification
	if ps.previousIsCurrent = sameAsDeployed(ps.current, d); !ps.previousIsCurrent {
		v = r.Images.Check(ctx, ref, &prev.Manifest)
	}
	ps.previousVerification = v
	switch v.Status {
	case metav1.ConditionTrue:
		ps.previous = &prev
	case metav1.ConditionUnknown:
		ps.requeue = r.registryRetry()
		if !ps.running.legacy {
			ps.previous = &prev // verified when the operator deployed it (OF-2)
		}
	default:
		ps.previousErr = "the running version's image is refused: " + v.Message
	}
}

func verifiedAt(d *v1alpha1.DeployedVersion) string {
	if d == nil || d.VerifiedAt == nil {
		return "an earlier pass"
	}
	return d.VerifiedAt.UTC().Format(time.RFC3339)
}

// registryRetry is how soon a Plugin whose image's registry could not be
// read is reconciled again.
func (r *PluginReconciler) registryRetry() time.Duration {
	if r.RegistryRetry > 0 {
		return r.RegistryRetry
	}
	return DefaultRegistryRetry
}
