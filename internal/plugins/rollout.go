package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Version is one version of a plugin instance: its name, image by digest,
// the manifest it declares and its config. The operator builds Current from
// the Plugin's spec and Previous from status.deployed. PlanRollout only picks
// between them (D-47) and never inspects Config; it travels with the Version
// so the adapter deploys each version with its own.
type Version struct {
	// Name is the plugin instance.
	Name string
	// Image is the version's image, pinned by digest (D-17).
	Image ImageRef
	// Manifest is what the version requests (D-42: equal to its signed label).
	Manifest Manifest
	// Config is the instance's JSON config for this version.
	Config json.RawMessage
}

// plugin is v as the Plugin that Effective reads.
func (v *Version) plugin() Plugin {
	return Plugin{Name: v.Name, Image: v.Image.String(), Manifest: v.Manifest, Config: v.Config}
}

// RolloutInput is everything PlanRollout decides from, filled by the operator.
type RolloutInput struct {
	// Current is the version the Plugin's spec asks for; nil when the spec is
	// invalid.
	Current *Version
	// CurrentDeployable is true only when the spec is valid, its config
	// matches the manifest's schema and its image passed TrustPolicy.Decide
	// (D-57). All three are checked outside this package.
	CurrentDeployable bool
	// Previous is the version that ran last (status.deployed), or nil. The
	// operator passes it only while its image still passes the signature check
	// (or the check is Unknown and this operator verified it before, OF-2).
	Previous *Version
	// Grant is the owner's PluginGrant, or nil when there is none. PlanRollout
	// validates it itself.
	Grant *Grant
}

// RolloutOutcome says which version runs and, when none does, why. The
// operator maps it onto the Ready condition's reason.
type RolloutOutcome int

// The outcomes of PlanRollout; see PlanRollout for when each applies.
const (
	// RolloutCurrent: the current version runs (Ready reason Running).
	RolloutCurrent RolloutOutcome = iota + 1
	// RolloutPrevious: the previous version keeps running under the current
	// grant while the current one waits for approval or cannot be deployed
	// (D-16; Ready reason RunningPreviousVersion).
	RolloutPrevious
	// RolloutNoGrant: there is no grant, so nothing runs and everything the
	// current version requests is pending. Deleting a grant revokes at once.
	RolloutNoGrant
	// RolloutInvalidGrant: the grant fails validation or names another
	// plugin, or it holds more hosts of the owner's choosing than the
	// current version has slots for (ErrTooManyOwnerHosts, OF-36) and no
	// earlier version may run; nothing runs (fail closed).
	RolloutInvalidGrant
	// RolloutAwaitingApproval: the current version requests more than its
	// grant and no earlier version may run, as on a first install; nothing runs.
	RolloutAwaitingApproval
	// RolloutNothingGranted: no capability the current version requests is
	// granted (ErrNoCapabilityGranted) and no earlier version may run; nothing runs.
	RolloutNothingGranted
	// RolloutNotDeployable: the current version is invalid or not deployable
	// and no earlier version may run; nothing runs (Ready reason InvalidSpec,
	// InvalidConfig or SignatureNotVerified, which the operator knows).
	RolloutNotDeployable
)

// String is the outcome's name, such as "AwaitingApproval".
func (o RolloutOutcome) String() string {
	switch o {
	case RolloutCurrent:
		return "Current"
	case RolloutPrevious:
		return "Previous"
	case RolloutNoGrant:
		return "NoGrant"
	case RolloutInvalidGrant:
		return "InvalidGrant"
	case RolloutAwaitingApproval:
		return "AwaitingApproval"
	case RolloutNothingGranted:
		return "NothingGranted"
	case RolloutNotDeployable:
		return "NotDeployable"
	}
	return fmt.Sprintf("RolloutOutcome(%d)", int(o))
}

// Runs reports whether the outcome runs a version.
func (o RolloutOutcome) Runs() bool { return o == RolloutCurrent || o == RolloutPrevious }

// RolloutPlan is PlanRollout's answer: the outcome, what runs with which
// effective permissions, and what waits for approval.
type RolloutPlan struct {
	// Outcome says which version runs, or why none does.
	Outcome RolloutOutcome
	// Run is the version that runs: Current, Previous or nil. It is always
	// one of the input pointers, never a version built here (D-47).
	Run *Version
	// Effective is Run's permissions under the current grant (D-16), nil
	// when nothing runs. Compile turns it into the Workload.
	Effective *EffectivePermissions
	// Pending is what Current requests beyond the grant (NeedsApproval);
	// everything Current requests when there is no grant; empty without a
	// Current.
	Pending Pending
	// Err says why Current does not run, when it does not: the grant's
	// validation errors, ErrNoCapabilityGranted, ErrTooManyOwnerHosts or
	// ErrGrantMismatch. It is nil
	// for RolloutCurrent, and for the other outcomes when the only reason is
	// pending approval or an undeployable current version, which the outcome
	// names.
	Err error
}

// errNotDeployable marks a current version that is nil or not deployable.
var errNotDeployable = errors.New("current version is not deployable")

// errNeedsApproval marks a current version that requests more than its grant.
var errNeedsApproval = errors.New("current version needs approval")

// PlanRollout decides which version of a plugin runs (D-16, D-47). It never
// picks anything but Current or Previous: upgrades happen only when the owner
// edits the Plugin. Whatever runs, runs under the current grant, so narrowing
// or deleting a grant takes effect at once, even while an upgrade waits.
//
// Pending is always NeedsApproval(Current.Manifest, Grant) (everything Current
// requests without a grant, nothing without a Current). The decision, first
// matching row wins:
//
//	grant      current                                   previous                    outcome                  runs
//	nil        any                                       any                         RolloutNoGrant           nothing
//	invalid¹   any                                       any                         RolloutInvalidGrant      nothing
//	valid      deployable, Pending empty, Effective ok   any                         RolloutCurrent           Current
//	valid      otherwise                                 Effective(previous) ok      RolloutPrevious          Previous
//	valid      nil or not deployable                     nil or nothing granted      RolloutNotDeployable     nothing
//	valid      no requested capability granted           nil or nothing granted      RolloutNothingGranted    nothing
//	valid      more owner hosts than its slots²          nil or nothing granted      RolloutInvalidGrant      nothing
//	valid      requests more than granted                nil or nothing granted      RolloutAwaitingApproval  nothing
//
// ¹ Grant.Validate fails, or the grant names another plugin than Current.
// ² ErrTooManyOwnerHosts: the grant's hosts of the owner's choosing
// outnumber Current's owner egress slots (OF-36), as after an upgrade to a
// version with fewer. Current does not run with some of them or none; a
// previous version with enough slots keeps running under the grant until
// the owner removes hosts from it.
//
// Edge cases, by the same rows: a previous version of which nothing is granted
// any more stops at once, and the outcome then says why Current cannot run.
// When Previous is the same image as Current and the grant was narrowed so
// that Current has something pending, Previous runs (RolloutPrevious) with
// only what is still granted: the same image, narrowed, until the owner
// approves again. A first install that asks for more than its grant runs
// nothing (RolloutAwaitingApproval).
func PlanRollout(in RolloutInput) RolloutPlan {
	plan := RolloutPlan{}
	if in.Current != nil {
		plan.Pending = NeedsApproval(in.Current.Manifest, in.Grant)
	}
	if in.Grant == nil {
		plan.Outcome = RolloutNoGrant
		return plan
	}
	if err := checkGrant(*in.Grant, in.Current); err != nil {
		plan.Outcome, plan.Err = RolloutInvalidGrant, err
		return plan
	}

	e, why := currentBlocked(in, plan.Pending)
	if why == nil {
		plan.Outcome, plan.Run, plan.Effective = RolloutCurrent, in.Current, &e
		return plan
	}
	plan.Err = publicReason(why)
	if in.Previous != nil {
		if e, err := Effective(in.Previous.plugin(), *in.Grant); err == nil {
			plan.Outcome, plan.Run, plan.Effective = RolloutPrevious, in.Previous, &e
			return plan
		}
	}
	switch {
	case errors.Is(why, ErrNoCapabilityGranted):
		plan.Outcome = RolloutNothingGranted
	case errors.Is(why, ErrTooManyOwnerHosts):
		plan.Outcome = RolloutInvalidGrant
	case errors.Is(why, errNeedsApproval):
		plan.Outcome = RolloutAwaitingApproval
	default:
		// Not deployable, or (after checkGrant, unexpectedly) any other
		// refusal by Effective: run nothing.
		plan.Outcome = RolloutNotDeployable
	}
	return plan
}

// checkGrant validates the grant and that it belongs to Current's instance.
func checkGrant(g Grant, current *Version) error {
	if err := g.Validate(); err != nil {
		return err
	}
	if current != nil && current.Name != g.Name {
		return fmt.Errorf("%w: grant %q, plugin %q", ErrGrantMismatch, g.Name, current.Name)
	}
	return nil
}

// currentBlocked returns Current's effective permissions when it may run,
// else why not: in order, not deployable, no requested capability granted,
// something pending, or Effective's own refusal.
func currentBlocked(in RolloutInput, pending Pending) (EffectivePermissions, error) {
	if in.Current == nil || !in.CurrentDeployable {
		return EffectivePermissions{}, errNotDeployable
	}
	e, err := Effective(in.Current.plugin(), *in.Grant)
	if err == nil && !pending.IsEmpty() {
		return EffectivePermissions{}, errNeedsApproval
	}
	return e, err
}

// publicReason keeps errors worth showing in RolloutPlan.Err and drops the
// internal markers the outcome already names.
func publicReason(err error) error {
	if errors.Is(err, errNotDeployable) || errors.Is(err, errNeedsApproval) {
		return nil
	}
	return err
}
