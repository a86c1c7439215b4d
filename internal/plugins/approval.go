package plugins

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinels of Approve. Each comes inside a *FieldError whose field is
// "selection.<list>[i]" for the selector at fault ("selection.egress[1]"),
// or "selection" for the selection as a whole.
var (
	// ErrNothingPending: the approval would change nothing; the grant
	// already holds everything the manifest requests (D-16).
	ErrNothingPending = errors.New("nothing pending")
	// ErrAlreadyGranted: a selector names what the grant already holds (for
	// a Secret slot: bound to the same Secret), so there is nothing to approve.
	ErrAlreadyGranted = errors.New("already granted, not pending")
	// ErrNotRequested: a selector names what the manifest does not request;
	// a grant beyond the request adds nothing (D-16).
	ErrNotRequested = errors.New("not requested by the plugin's manifest")
	// ErrNoOwnerSlot: a selector names a host the manifest does not request
	// while every slot the manifest has for a host of the owner's choosing is
	// filled (OF-36). A manifest without such slots gives ErrNotRequested.
	ErrNoOwnerSlot = errors.New("no free slot for a host of your choosing")
	// ErrSelectionConflict: a selection both approves everything (All) and
	// names capabilities, hosts, data tiers or resources.
	ErrSelectionConflict = errors.New("conflicting selection")
)

// Selection is what an owner asks to approve (D-16): everything pending, or
// only the named parts. Secrets also bind slots to Secrets of the owner's
// choosing (OF-1), so it may name a slot the grant already holds to rebind it.
type Selection struct {
	// All approves everything pending even when Secrets are named, which then
	// only bind. It may not be combined with Capabilities, Egress or DataTiers.
	All bool
	// Capabilities to approve.
	Capabilities []Capability
	// Egress hosts to approve, host or host:port, compared in canonical form.
	// A host the manifest does not request is a host of the owner's choosing
	// and fills one of the manifest's free OwnerEgress slots (OF-36).
	Egress []string
	// Secrets are slots to approve or rebind, each "SLOT" (mount the Secret
	// named like the slot) or "SLOT=SECRET" (mount SECRET).
	Secrets []string
	// DataTiers to approve.
	DataTiers []string
	// Resources approves the resources the manifest asks for beyond the
	// grant, exactly as asked: the owner takes or leaves the quantities,
	// never picks others.
	Resources bool
	// PullSecrets are Secrets to add to the grant's image pull Secrets. The
	// manifest never asks for them, so they are never pending: naming one
	// alone approves nothing else.
	PullSecrets []string
}

// named reports whether any part is named, so only those are approved.
func (s Selection) named() bool {
	return len(s.Capabilities) > 0 || len(s.Egress) > 0 || len(s.DataTiers) > 0 || s.Resources ||
		((len(s.Secrets) > 0 || len(s.PullSecrets) > 0) && !s.All)
}

// Approval is the plan of one approval: what was pending, what it adds and
// the grant that results. Approve computes it without writing anything, so a
// person can confirm it first. Every list is sorted.
type Approval struct {
	// Pending is everything the manifest requests that the grant did not hold.
	Pending Pending
	// Approved is the part of Pending this approval adds.
	Approved Pending
	// Secrets are the approved slots, each with the Secret it mounts and where.
	Secrets []SecretBinding
	// Rebound are slots the grant already held that now mount another Secret.
	Rebound []SecretBinding
	// PullSecrets are the image pull Secrets this approval adds to the grant.
	PullSecrets []string
	// OwnerEgress are the hosts of the owner's choosing this approval adds,
	// canonical: named hosts the manifest does not request (OF-36). They are
	// never pending, so only a named host adds one.
	OwnerEgress []string
	// Grant is the grant after the approval, validated.
	Grant Grant
}

// Remaining is what stays pending once the approval is granted.
func (a Approval) Remaining() Pending {
	return Pending{
		Capabilities: subtract(a.Pending.Capabilities, a.Approved.Capabilities),
		Egress:       subtract(a.Pending.Egress, a.Approved.Egress),
		Secrets:      subtract(a.Pending.Secrets, a.Approved.Secrets),
		DataTiers:    subtract(a.Pending.DataTiers, a.Approved.DataTiers),
		Resources:    remainingResources(a.Pending.Resources, a.Approved.Resources),
	}
}

// remainingResources keeps the dimensions of pending that approved leaves out.
func remainingResources(pending, approved Resources) Resources {
	out := pending
	for _, d := range resourceDims {
		if *d.text(&approved) != "" {
			*d.text(&out) = ""
		}
	}
	return out
}

// Approve plans the grant of the plugin name that approves sel of what m
// requests beyond current, a nil current meaning no grant yet (D-16). With
// nothing named, everything pending is approved; otherwise only the named
// parts, and naming anything not pending is refused with ErrAlreadyGranted or
// ErrNotRequested, since a grant beyond the request adds nothing. The one
// exception is a named host the manifest does not request while it has a
// free owner egress slot: that host is the owner's own, added to the grant's
// OwnerEgress, and without a free slot it is ErrNoOwnerSlot (OF-36). A slot
// bound with SLOT=SECRET mounts SECRET (OF-1); naming a granted slot with
// another Secret rebinds it. Resources are approved as the manifest asks for
// them (Selection.Resources, or nothing named), written into the grant's
// Resources. Nothing to approve and nothing rebound is ErrNothingPending.
//
// Selection problems are *FieldErrors (see the sentinels above, and
// ErrUnknownSecret, ErrDuplicate, ErrRequired, ErrInvalidSecretName and
// ErrInvalidEgressHost for a selector that cannot be read); a resulting grant
// that is invalid returns Grant.Validate's errors, with "grant." fields.
func Approve(name string, m Manifest, current *Grant, sel Selection) (Approval, error) {
	a := Approval{Pending: NeedsApproval(m, current)}
	if sel.All && (len(sel.Capabilities) > 0 || len(sel.Egress) > 0 || len(sel.DataTiers) > 0 || sel.Resources) {
		return a, &FieldError{Field: "selection.all", Err: ErrSelectionConflict, Detail: "all approves everything pending; combine it only with secrets"}
	}
	mounts := make(map[string]string, len(m.Secrets))
	for _, s := range m.Secrets {
		mounts[s.Name] = s.MountPath
	}
	named, err := readSecretSelectors(sel.Secrets, mounts)
	if err != nil {
		return a, err
	}
	a.Approved = a.Pending
	if sel.named() {
		if a.Approved, a.OwnerEgress, err = pick(a.Pending, m, current, sel, named); err != nil {
			return a, err
		}
	}

	next := cloneGrant(name, current)
	bound := make(map[string]string, len(named))
	for _, b := range named {
		bound[b.grant.Name] = b.grant.Secret()
		if slices.Contains(a.Approved.Secrets, b.grant.Name) {
			continue
		}
		// Known and not pending, so the grant holds it: rebind it.
		i := slices.IndexFunc(next.Secrets, func(s SecretGrant) bool { return s.Name == b.grant.Name })
		if i < 0 || next.Secrets[i].Secret() == b.grant.Secret() {
			return a, &FieldError{Field: b.field, Err: ErrAlreadyGranted, Detail: fmt.Sprintf("slot %q mounts Secret %q already", b.grant.Name, b.grant.Secret())}
		}
		next.Secrets[i].SecretName = b.grant.SecretName
		a.Rebound = append(a.Rebound, SecretBinding{Slot: b.grant.Name, SecretName: b.grant.Secret(), MountPath: mounts[b.grant.Name]})
	}
	pulls, err := readPullSecrets(sel.PullSecrets, next.ImagePullSecrets)
	if err != nil {
		return a, err
	}
	a.PullSecrets = pulls
	if a.Approved.IsEmpty() && len(a.Rebound) == 0 && len(a.PullSecrets) == 0 && len(a.OwnerEgress) == 0 {
		return a, &FieldError{Field: "selection", Err: ErrNothingPending, Detail: "the grant holds everything the manifest requests"}
	}

	next.Capabilities = append(next.Capabilities, a.Approved.Capabilities...)
	next.Egress = append(next.Egress, a.Approved.Egress...)
	next.OwnerEgress = append(next.OwnerEgress, a.OwnerEgress...)
	next.DataTiers = append(next.DataTiers, a.Approved.DataTiers...)
	for _, d := range resourceDims {
		if v := *d.text(&a.Approved.Resources); v != "" {
			*d.text(&next.Resources) = v
		}
	}
	for _, slot := range a.Approved.Secrets {
		secret, ok := bound[slot]
		if !ok {
			secret = slot
		}
		next.Secrets = append(next.Secrets, SecretGrant{Name: slot, SecretName: secretNameFor(slot, secret)})
		a.Secrets = append(a.Secrets, SecretBinding{Slot: slot, SecretName: secret, MountPath: mounts[slot]})
	}
	slices.Sort(next.Capabilities)
	slices.Sort(next.Egress)
	slices.Sort(next.OwnerEgress)
	slices.SortFunc(next.Secrets, func(x, y SecretGrant) int { return strings.Compare(x.Name, y.Name) })
	slices.Sort(next.DataTiers)
	next.ImagePullSecrets = append(next.ImagePullSecrets, a.PullSecrets...)
	slices.Sort(next.ImagePullSecrets)
	slices.SortFunc(a.Rebound, func(x, y SecretBinding) int { return strings.Compare(x.Slot, y.Slot) })
	if err := next.Validate(); err != nil {
		return a, err
	}
	a.Grant = next
	return a, nil
}

// secretSelector is one read Secret selector and the field it came from.
type secretSelector struct {
	field string
	grant SecretGrant
}

// readSecretSelectors reads each SLOT[=SECRET] of a selection, in order,
// refusing a slot the manifest (mounts) does not have and one named twice.
func readSecretSelectors(raw []string, mounts map[string]string) ([]secretSelector, error) {
	out := make([]secretSelector, 0, len(raw))
	seen := map[string]bool{}
	for i, s := range raw {
		field := fmt.Sprintf("selection.secrets[%d]", i)
		g, err := parseSecretBinding(field, s)
		if err != nil {
			return nil, err
		}
		if _, ok := mounts[g.Name]; !ok {
			slots := sortedKeys(mounts)
			if len(slots) == 0 {
				slots = []string{"none"}
			}
			return nil, &FieldError{Field: field, Err: ErrUnknownSecret, Detail: fmt.Sprintf("the manifest has no Secret slot %q (slots: %s)", g.Name, strings.Join(slots, ", "))}
		}
		if seen[g.Name] {
			return nil, &FieldError{Field: field, Err: ErrDuplicate, Detail: fmt.Sprintf("slot %q named twice", g.Name)}
		}
		seen[g.Name] = true
		out = append(out, secretSelector{field: field, grant: g})
	}
	return out, nil
}

// readPullSecrets reads the pull Secrets a selection adds, sorted: each a
// Secret name (ErrInvalidSecretName), named once (ErrDuplicate) and not held
// by the grant already (ErrAlreadyGranted). The cap is Grant.Validate's.
func readPullSecrets(raw, held []string) ([]string, error) {
	var out []string
	for i, s := range raw {
		field := fmt.Sprintf("selection.pullSecrets[%d]", i)
		switch {
		case !isDNSSubdomain(s):
			return nil, &FieldError{Field: field, Err: ErrInvalidSecretName, Detail: fmt.Sprintf("%q is not a Kubernetes Secret name", s)}
		case slices.Contains(out, s):
			return nil, &FieldError{Field: field, Err: ErrDuplicate, Detail: fmt.Sprintf("pull Secret %q named twice", s)}
		case slices.Contains(held, s):
			return nil, &FieldError{Field: field, Err: ErrAlreadyGranted, Detail: fmt.Sprintf("the grant holds pull Secret %q already", s)}
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

// pick keeps the named parts of pending, and returns as owner the named
// hosts m does not request that fill its free owner egress slots under
// current (OF-36). Naming a capability, host or data tier that is not
// pending is ErrAlreadyGranted when m requests it (or, for a host, when
// current holds it among the owner's hosts) and ErrNotRequested when it does
// not, but for a host ErrNoOwnerSlot when m has slots and all are full; a named Secret
// slot that is not pending is left to Approve, which rebinds it. Approve
// never calls it with sel.All.
func pick(pending Pending, m Manifest, current *Grant, sel Selection, secrets []secretSelector) (Pending, []string, error) {
	var out Pending
	var owner []string
	notPending := func(field string, requested bool) error {
		if requested {
			return &FieldError{Field: field, Err: ErrAlreadyGranted}
		}
		return &FieldError{Field: field, Err: ErrNotRequested, Detail: "a grant beyond the request adds nothing"}
	}
	for i, c := range sel.Capabilities {
		if !slices.Contains(pending.Capabilities, c) {
			return out, nil, notPending(fmt.Sprintf("selection.capabilities[%d]", i), slices.Contains(m.Capabilities, c))
		}
		out.Capabilities = appendOnce(out.Capabilities, c)
	}
	requestedHosts := canonicalHosts(m.Egress)
	heldOwner := OwnerHosts(m, current)
	free := FreeOwnerSlots(m, current)
	for i, h := range sel.Egress {
		field := fmt.Sprintf("selection.egress[%d]", i)
		canon, err := CanonicalEgressHost(h)
		if err != nil {
			return out, nil, &FieldError{Field: field, Err: ErrInvalidEgressHost, Detail: strings.TrimPrefix(err.Error(), ErrInvalidEgressHost.Error()+": ")}
		}
		switch {
		case slices.Contains(pending.Egress, canon):
			out.Egress = appendOnce(out.Egress, canon)
		case slices.Contains(requestedHosts, canon):
			return out, nil, notPending(field, true)
		case slices.Contains(heldOwner, canon):
			return out, nil, &FieldError{Field: field, Err: ErrAlreadyGranted, Detail: fmt.Sprintf("%s is a host of your choosing the grant holds already", canon)}
		case slices.Contains(owner, canon):
			// Named twice in this selection: added once.
		case len(owner) < free:
			owner = append(owner, canon)
		case m.OwnerSlots() == 0:
			return out, nil, notPending(field, false)
		default:
			return out, nil, &FieldError{Field: field, Err: ErrNoOwnerSlot, Detail: ownerSlotsDetail(canon, m, heldOwner, owner)}
		}
	}
	for i, t := range sel.DataTiers {
		if !slices.Contains(pending.DataTiers, t) {
			return out, nil, notPending(fmt.Sprintf("selection.dataTiers[%d]", i), slices.Contains(m.DataTiers, t))
		}
		out.DataTiers = appendOnce(out.DataTiers, t)
	}
	if sel.Resources {
		if pending.Resources.IsZero() {
			return out, nil, notPending("selection.resources", requestedLimits(m.Resources) != DefaultResourceLimits())
		}
		out.Resources = pending.Resources
	}
	for _, s := range secrets {
		if slices.Contains(pending.Secrets, s.grant.Name) {
			out.Secrets = append(out.Secrets, s.grant.Name)
		}
	}
	slices.Sort(out.Capabilities)
	slices.Sort(out.Egress)
	slices.Sort(out.Secrets)
	slices.Sort(out.DataTiers)
	slices.Sort(owner)
	return out, owner, nil
}

// ownerSlotsDetail says why host does not fit: the manifest does not
// request it, and its slots are taken by the owner's hosts the grant holds
// and those named before in the selection.
func ownerSlotsDetail(host string, m Manifest, held, named []string) string {
	taken := append(slices.Clone(held), named...)
	slices.Sort(taken)
	return fmt.Sprintf("the manifest does not request %s and allows %d host(s) of your choosing, taken by %s; remove one from the grant's ownerEgress first",
		host, m.OwnerSlots(), strings.Join(taken, ", "))
}

// appendOnce appends v unless s holds it already.
func appendOnce[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// cloneGrant is a copy of current named name, sharing no slice with it; a
// nil current gives an empty grant.
func cloneGrant(name string, current *Grant) Grant {
	if current == nil {
		return Grant{Name: name}
	}
	return Grant{
		Name:         name,
		Capabilities: slices.Clone(current.Capabilities),
		Egress:       slices.Clone(current.Egress),
		OwnerEgress:  slices.Clone(current.OwnerEgress),
		Secrets:      slices.Clone(current.Secrets),
		DataTiers:    slices.Clone(current.DataTiers),
		Resources:    current.Resources,

		ImagePullSecrets: slices.Clone(current.ImagePullSecrets),
	}
}
