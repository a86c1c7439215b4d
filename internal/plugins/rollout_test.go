package plugins

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// rolloutImage parses a test image whose digest ends in the given hex digit.
func rolloutImage(t testing.TB, last string) ImageRef {
	t.Helper()
	ref, err := ParseImageRef("ghcr.io/arkadiuss/openfief/nbp-fx@sha256:" + strings.Repeat("a", 63) + last)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// rolloutVersion is nbp-fx at one image, asking for a connector and hosts.
func rolloutVersion(t testing.TB, digit string, hosts ...string) *Version {
	return &Version{
		Name:  "nbp-fx",
		Image: rolloutImage(t, digit),
		Manifest: Manifest{
			Capabilities: []Capability{CapabilityConnector},
			Egress:       hosts,
			Secrets:      []SecretMount{{Name: "nbp-token", MountPath: "/etc/nbp"}},
			DataTiers:    []string{"fx_rates"},
		},
		Config: []byte(`{"currency":"PLN"}`),
	}
}

// rolloutGrant approves nbp-fx as a connector with the given hosts.
func rolloutGrant(hosts ...string) *Grant {
	return &Grant{
		Name:         "nbp-fx",
		Capabilities: []Capability{CapabilityConnector},
		Egress:       hosts,
		Secrets:      []SecretGrant{{Name: "nbp-token"}},
		DataTiers:    []string{"fx_rates"},
	}
}

// withOwner returns a copy of g listing hosts of the owner's choosing.
func withOwner(g *Grant, hosts ...string) *Grant {
	c := *g
	c.OwnerEgress = hosts
	return &c
}

// withResources returns a copy of g approving r.
func withResources(g *Grant, r Resources) *Grant {
	c := *g
	c.Resources = r
	return &c
}

// withCaps returns a copy of g approving only caps.
func withCaps(g *Grant, caps ...Capability) *Grant {
	c := *g
	c.Capabilities = caps
	return &c
}

func TestPlanRollout(t *testing.T) {
	const oldHost, newHost = "api.nbp.pl", "static.nbp.pl"
	v1 := rolloutVersion(t, "1", oldHost)
	v2 := rolloutVersion(t, "2", oldHost, newHost)
	v2again := rolloutVersion(t, "2", oldHost, newHost) // same image as v2, another pointer
	view := rolloutVersion(t, "3", oldHost)
	view.Manifest.Capabilities = []Capability{CapabilityView}
	both := rolloutVersion(t, "4", oldHost)
	both.Manifest.Capabilities = []Capability{CapabilityConnector, CapabilityView}
	stranger := rolloutVersion(t, "5", oldHost)
	stranger.Name = "someone-else"
	slotted := rolloutVersion(t, "6", oldHost) // one host of the owner's choosing
	slotted.Manifest.OwnerEgress = 1
	ownerGrant := func(hosts ...string) *Grant {
		g := rolloutGrant(hosts...)
		g.OwnerEgress = []string{"cloud.example.com"}
		return g
	}

	type want struct {
		outcome RolloutOutcome
		run     *Version
		egress  []string // effective egress of what runs
		pending Pending
		err     error
	}
	tests := map[string]struct {
		current    *Version
		deployable bool
		previous   *Version
		grant      *Grant
		want       want
	}{
		"first install fully granted runs the current version": {
			current: v1, deployable: true, grant: rolloutGrant(oldHost),
			want: want{outcome: RolloutCurrent, run: v1, egress: []string{"api.nbp.pl:443"}},
		},
		"first install asking for more than granted runs nothing": {
			current: v2, deployable: true, grant: rolloutGrant(oldHost),
			want: want{outcome: RolloutAwaitingApproval, pending: Pending{Egress: []string{"static.nbp.pl:443"}}},
		},
		"upgrade requesting a new host keeps the previous version": {
			current: v2, deployable: true, previous: v1, grant: rolloutGrant(oldHost),
			want: want{
				outcome: RolloutPrevious,
				run:     v1,
				egress:  []string{"api.nbp.pl:443"},
				pending: Pending{Egress: []string{"static.nbp.pl:443"}},
			},
		},
		"approved upgrade runs the current version": {
			current: v2, deployable: true, previous: v1, grant: rolloutGrant(oldHost, newHost),
			want: want{outcome: RolloutCurrent, run: v2, egress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
		},
		"narrowed grant takes effect at once while an upgrade waits": {
			current: v2, deployable: true, previous: v1, grant: rolloutGrant(),
			want: want{
				outcome: RolloutPrevious,
				run:     v1,
				pending: Pending{Egress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
			},
		},
		"no grant runs nothing and everything is pending": {
			current: v2, deployable: true, previous: v1,
			want: want{outcome: RolloutNoGrant, pending: NeedsApproval(v2.Manifest, nil)},
		},
		"no grant and an invalid spec: nothing pending": {
			previous: v1,
			want:     want{outcome: RolloutNoGrant},
		},
		"invalid grant runs nothing, not even the previous version": {
			current: v1, deployable: true, previous: v1, grant: rolloutGrant("*.nbp.pl"),
			want: want{outcome: RolloutInvalidGrant, pending: Pending{Egress: []string{"api.nbp.pl:443"}}, err: ErrInvalidEgressHost},
		},
		"grant of another instance is invalid": {
			current: v1, deployable: true, grant: func() *Grant { g := rolloutGrant(oldHost); g.Name = "other"; return g }(),
			want: want{outcome: RolloutInvalidGrant, err: ErrGrantMismatch},
		},
		"no requested capability granted runs nothing": {
			current: v1, deployable: true, grant: withCaps(rolloutGrant(oldHost), CapabilityView),
			want: want{outcome: RolloutNothingGranted, pending: Pending{Capabilities: []Capability{CapabilityConnector}}, err: ErrNoCapabilityGranted},
		},
		"previous version of which nothing is granted any more stops": {
			current: v1, deployable: true, previous: v1, grant: withCaps(rolloutGrant(oldHost), CapabilityView),
			want: want{outcome: RolloutNothingGranted, pending: Pending{Capabilities: []Capability{CapabilityConnector}}, err: ErrNoCapabilityGranted},
		},
		"previous version stops and the current one awaits approval": {
			current: both, deployable: true, previous: v1, grant: withCaps(rolloutGrant(oldHost), CapabilityView),
			want: want{outcome: RolloutAwaitingApproval, pending: Pending{Capabilities: []Capability{CapabilityConnector}}},
		},
		"current with nothing granted keeps the previous version": {
			current: view, deployable: true, previous: v1, grant: rolloutGrant(oldHost),
			want: want{
				outcome: RolloutPrevious, run: v1, egress: []string{"api.nbp.pl:443"},
				pending: Pending{Capabilities: []Capability{CapabilityView}}, err: ErrNoCapabilityGranted,
			},
		},
		"undeployable current keeps the previous version under the current grant": {
			current: v2, deployable: false, previous: v1, grant: rolloutGrant(oldHost, newHost),
			want: want{outcome: RolloutPrevious, run: v1, egress: []string{"api.nbp.pl:443"}},
		},
		"invalid spec keeps the previous version": {
			current: nil, previous: v1, grant: rolloutGrant(oldHost),
			want: want{outcome: RolloutPrevious, run: v1, egress: []string{"api.nbp.pl:443"}},
		},
		"invalid spec without a previous version runs nothing": {
			current: nil, grant: rolloutGrant(oldHost),
			want: want{outcome: RolloutNotDeployable},
		},
		"undeployable current without a previous version runs nothing": {
			current: v2, deployable: false, grant: rolloutGrant(oldHost),
			want: want{outcome: RolloutNotDeployable, pending: Pending{Egress: []string{"static.nbp.pl:443"}}},
		},
		"undeployable current and a previous version with nothing granted": {
			current: v1, deployable: false, previous: v1, grant: withCaps(rolloutGrant(oldHost)),
			want: want{outcome: RolloutNotDeployable, pending: Pending{Capabilities: []Capability{CapabilityConnector}}},
		},
		"current equal to previous, fully granted, runs as current": {
			current: v2, deployable: true, previous: v2again, grant: rolloutGrant(oldHost, newHost),
			want: want{outcome: RolloutCurrent, run: v2, egress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
		},
		"same image under a narrowed grant keeps running, narrowed": {
			current: v2, deployable: true, previous: v2again, grant: rolloutGrant(oldHost),
			want: want{
				outcome: RolloutPrevious, run: v2again, egress: []string{"api.nbp.pl:443"},
				pending: Pending{Egress: []string{"static.nbp.pl:443"}},
			},
		},
		"a previous version of another instance never runs": {
			current: v2, deployable: false, previous: stranger, grant: rolloutGrant(oldHost),
			want: want{outcome: RolloutNotDeployable, pending: Pending{Egress: []string{"static.nbp.pl:443"}}},
		},
		"the owner's host fits the current version's slot": {
			current: slotted, deployable: true, previous: v1, grant: ownerGrant(oldHost),
			want: want{outcome: RolloutCurrent, run: slotted, egress: []string{"api.nbp.pl:443", "cloud.example.com:443"}},
		},
		"upgrade to a version with fewer slots keeps the previous version": {
			current: v1, deployable: true, previous: slotted, grant: ownerGrant(oldHost),
			want: want{outcome: RolloutPrevious, run: slotted, egress: []string{"api.nbp.pl:443", "cloud.example.com:443"}, err: ErrTooManyOwnerHosts},
		},
		"fewer slots than owner hosts without a previous version runs nothing": {
			current: v1, deployable: true, grant: ownerGrant(oldHost),
			want: want{outcome: RolloutInvalidGrant, err: ErrTooManyOwnerHosts},
		},
		"more owner hosts than slots stops the version that runs": {
			current: slotted, deployable: true, previous: slotted,
			grant: func() *Grant {
				g := ownerGrant(oldHost)
				g.OwnerEgress = append(g.OwnerEgress, "nas.example.org")
				return g
			}(),
			want: want{outcome: RolloutInvalidGrant, err: ErrTooManyOwnerHosts},
		},
		"grant approving more than requested adds nothing": {
			current: v1, deployable: true, grant: rolloutGrant(oldHost, newHost, "extra.example.com"),
			want: want{outcome: RolloutCurrent, run: v1, egress: []string{"api.nbp.pl:443"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := RolloutInput{Current: tc.current, CurrentDeployable: tc.deployable, Previous: tc.previous, Grant: tc.grant}
			got := PlanRollout(in)
			checkPlanInvariants(t, in, got)
			if got.Outcome != tc.want.outcome {
				t.Errorf("Outcome = %v, want %v (err %v)", got.Outcome, tc.want.outcome, got.Err)
			}
			if got.Run != tc.want.run {
				t.Errorf("Run = %s, want %s", versionLabel(got.Run), versionLabel(tc.want.run))
			}
			if got.Effective != nil {
				sameOrDiff(t, "effective egress", tc.want.egress, got.Effective.Egress())
			}
			sameOrDiff(t, "pending", tc.want.pending, got.Pending)
			if tc.want.err == nil && got.Err != nil || !errors.Is(got.Err, tc.want.err) {
				t.Errorf("Err = %v, want %v", got.Err, tc.want.err)
			}
		})
	}
}

func versionLabel(v *Version) string {
	if v == nil {
		return "nothing"
	}
	return v.Name + " " + v.Image.String()
}

// checkPlanInvariants checks what every plan must satisfy whatever its input:
// it runs Current, Previous or nothing (D-47); what runs never exceeds the
// grant nor its own manifest (D-16); and Pending is NeedsApproval of Current.
func checkPlanInvariants(t *testing.T, in RolloutInput, plan RolloutPlan) {
	t.Helper()
	switch {
	case plan.Run == nil:
	case plan.Run == in.Current && plan.Outcome == RolloutCurrent:
	case plan.Run == in.Previous && plan.Outcome == RolloutPrevious:
	default:
		t.Fatalf("Run %s with outcome %v is neither Current nor Previous", versionLabel(plan.Run), plan.Outcome)
	}
	if plan.Outcome.Runs() != (plan.Run != nil) || (plan.Run != nil) != (plan.Effective != nil) {
		t.Fatalf("outcome %v, Run %s, Effective %v disagree", plan.Outcome, versionLabel(plan.Run), plan.Effective)
	}
	if in.Grant == nil && plan.Run != nil {
		t.Fatalf("something runs without a grant")
	}
	if plan.Outcome == RolloutCurrent && (!in.CurrentDeployable || !plan.Pending.IsEmpty() || plan.Err != nil) {
		t.Fatalf("current runs while not deployable, with pending %v or with %v", plan.Pending, plan.Err)
	}
	wantPending := Pending{}
	if in.Current != nil {
		wantPending = NeedsApproval(in.Current.Manifest, in.Grant)
	}
	sameOrDiff(t, "pending is NeedsApproval(current, grant)", wantPending, plan.Pending)
	if plan.Run == nil {
		return
	}
	e := *plan.Effective
	if again, err := Effective(plan.Run.plugin(), *in.Grant); err != nil || !again.Equal(e) {
		t.Fatalf("Effective is not Run under the current grant: %v, %v", again, err)
	}
	if msg := exceeds(e, plan.Run.Manifest, *in.Grant); msg != "" {
		t.Fatalf("what runs exceeds its manifest or grant: %s", msg)
	}
}

// exceeds says what e holds beyond the manifest or the grant, or "".
func exceeds(e EffectivePermissions, m Manifest, g Grant) string {
	var out []string
	for _, c := range e.Capabilities() {
		if !slices.Contains(m.Capabilities, c) || !slices.Contains(g.Capabilities, c) {
			out = append(out, "capability "+string(c))
		}
	}
	owner := 0
	for _, h := range e.Egress() {
		requested := slices.Contains(canonicalHosts(m.Egress), h)
		ownerListed := slices.Contains(canonicalHosts(g.OwnerEgress), h)
		switch {
		case requested && (ownerListed || slices.Contains(canonicalHosts(g.Egress), h)):
		case !requested && ownerListed:
			owner++ // a host of the owner's choosing (OF-36)
		default:
			out = append(out, "egress "+h)
		}
	}
	if owner > m.OwnerEgress {
		out = append(out, fmt.Sprintf("%d hosts of the owner's choosing for %d slots", owner, m.OwnerEgress))
	}
	for _, s := range e.Secrets() {
		inManifest := slices.Contains(m.Secrets, SecretMount{Name: s.Slot, MountPath: s.MountPath})
		inGrant := slices.ContainsFunc(g.Secrets, func(sg SecretGrant) bool {
			return sg.Name == s.Slot && (sg.SecretName == s.SecretName || sg.SecretName == "" && s.SecretName == s.Slot)
		})
		if !inManifest || !inGrant {
			out = append(out, "secret "+s.Slot)
		}
	}
	for _, d := range e.DataTiers() {
		if !slices.Contains(m.DataTiers, d) || !slices.Contains(g.DataTiers, d) {
			out = append(out, "data tier "+d)
		}
	}
	// Each resource is at most what the manifest asks (its default when it
	// asks none) and at most what the grant approves, the default needing
	// no grant.
	for _, d := range resourceDims {
		got := *d.value(new(e.Resources()))
		asked, approved := d.def, d.def
		if v, err := d.parse(*d.text(&m.Resources)); err == nil {
			asked = v
		}
		if v, err := d.parse(*d.text(&g.Resources)); err == nil && v > approved {
			approved = v
		}
		if got > asked || got > approved || got > d.max || got <= 0 {
			out = append(out, fmt.Sprintf("%s %s (asked %s, approved %s)", d.field, d.format(got), d.format(asked), d.format(approved)))
		}
	}
	return strings.Join(out, ", ")
}

// Test_RollingUpdateSequences plays an owner's and a vendor's edits one after
// another, as the operator would see them, and checks the invariants after
// every step. status.deployed follows what runs; a pass that runs nothing
// tears the workload down and clears it.
func Test_RollingUpdateSequences(t *testing.T) {
	const api, static = "api.nbp.pl", "static.nbp.pl"
	v1 := rolloutVersion(t, "1", api)
	v2 := rolloutVersion(t, "2", api, static)
	v3 := rolloutVersion(t, "3", api, static)

	type step struct {
		name        string
		edit        func(s *rolloutState)
		wantOutcome RolloutOutcome
		wantRun     *Version
		wantEgress  []string
		wantPending Pending
	}
	sequences := map[string][]step{
		"install, approve, upgrade asking more, approve, narrow, revoke, grant narrowly, approve": {
			{name: "install without a grant", edit: func(s *rolloutState) { s.spec, s.deployable = v1, true },
				wantOutcome: RolloutNoGrant, wantPending: NeedsApproval(v1.Manifest, nil)},
			{name: "owner approves what v1 asks", edit: func(s *rolloutState) { s.grant = rolloutGrant(api) },
				wantOutcome: RolloutCurrent, wantRun: v1, wantEgress: []string{"api.nbp.pl:443"}},
			{name: "owner upgrades to v2, which asks for a new host", edit: func(s *rolloutState) { s.spec = v2 },
				wantOutcome: RolloutPrevious, wantRun: v1, wantEgress: []string{"api.nbp.pl:443"},
				wantPending: Pending{Egress: []string{"static.nbp.pl:443"}}},
			{name: "owner approves the new host", edit: func(s *rolloutState) { s.grant = rolloutGrant(api, static) },
				wantOutcome: RolloutCurrent, wantRun: v2, wantEgress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
			{name: "owner narrows the grant", edit: func(s *rolloutState) { s.grant = rolloutGrant(api) },
				wantOutcome: RolloutPrevious, wantRun: v2, wantEgress: []string{"api.nbp.pl:443"},
				wantPending: Pending{Egress: []string{"static.nbp.pl:443"}}},
			{name: "owner revokes the grant", edit: func(s *rolloutState) { s.grant = nil },
				wantOutcome: RolloutNoGrant, wantPending: NeedsApproval(v2.Manifest, nil)},
			{name: "owner grants narrowly again", edit: func(s *rolloutState) { s.grant = rolloutGrant(api) },
				wantOutcome: RolloutAwaitingApproval, wantPending: Pending{Egress: []string{"static.nbp.pl:443"}}},
			{name: "owner approves everything", edit: func(s *rolloutState) { s.grant = rolloutGrant(api, static) },
				wantOutcome: RolloutCurrent, wantRun: v2, wantEgress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
		},
		"an upgrade that fails its checks, a narrowed grant, then nothing granted": {
			{name: "install approved", edit: func(s *rolloutState) { s.spec, s.deployable, s.grant = v2, true, rolloutGrant(api, static) },
				wantOutcome: RolloutCurrent, wantRun: v2, wantEgress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
			{name: "upgrade to an unsigned v3", edit: func(s *rolloutState) { s.spec, s.deployable = v3, false },
				wantOutcome: RolloutPrevious, wantRun: v2, wantEgress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
			{name: "narrowed while v3 is refused", edit: func(s *rolloutState) { s.grant = rolloutGrant(static) },
				wantOutcome: RolloutPrevious, wantRun: v2, wantEgress: []string{"static.nbp.pl:443"},
				wantPending: Pending{Egress: []string{"api.nbp.pl:443"}}},
			{name: "spec made invalid", edit: func(s *rolloutState) { s.spec, s.deployable = nil, false },
				wantOutcome: RolloutPrevious, wantRun: v2, wantEgress: []string{"static.nbp.pl:443"}},
			{name: "no capability granted any more", edit: func(s *rolloutState) { s.grant = withCaps(s.grant, CapabilityView) },
				wantOutcome: RolloutNotDeployable},
			{name: "v3 fixed, capability still not granted", edit: func(s *rolloutState) { s.spec, s.deployable = v3, true },
				wantOutcome: RolloutNothingGranted, wantPending: Pending{Capabilities: []Capability{CapabilityConnector}, Egress: []string{"api.nbp.pl:443"}}},
			{name: "grant made invalid", edit: func(s *rolloutState) { s.grant = rolloutGrant("10.0.0.1") },
				wantOutcome: RolloutInvalidGrant, wantPending: Pending{Egress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}}},
			{name: "grant fixed", edit: func(s *rolloutState) { s.grant = rolloutGrant(api, static) },
				wantOutcome: RolloutCurrent, wantRun: v3, wantEgress: []string{"api.nbp.pl:443", "static.nbp.pl:443"}},
		},
	}
	for name, steps := range sequences {
		t.Run(name, func(t *testing.T) {
			var s rolloutState
			for i, st := range steps {
				st.edit(&s)
				in, plan := s.reconcile()
				checkPlanInvariants(t, in, plan)
				if plan.Outcome != st.wantOutcome || plan.Run != st.wantRun {
					t.Fatalf("step %d (%s): %v running %s, want %v running %s",
						i+1, st.name, plan.Outcome, versionLabel(plan.Run), st.wantOutcome, versionLabel(st.wantRun))
				}
				var egress []string
				if plan.Effective != nil {
					egress = plan.Effective.Egress()
				}
				sameOrDiff(t, fmt.Sprintf("step %d (%s) egress", i+1, st.name), st.wantEgress, egress)
				sameOrDiff(t, fmt.Sprintf("step %d (%s) pending", i+1, st.name), st.wantPending, plan.Pending)
			}
		})
	}
}

// rolloutState is the cluster as one plugin's reconcile sees it.
type rolloutState struct {
	spec       *Version
	deployable bool
	grant      *Grant
	deployed   *Version // status.deployed
}

// reconcile plans one pass and records what runs in status.deployed.
func (s *rolloutState) reconcile() (RolloutInput, RolloutPlan) {
	in := RolloutInput{Current: s.spec, CurrentDeployable: s.deployable, Previous: s.deployed, Grant: s.grant}
	plan := PlanRollout(in)
	s.deployed = plan.Run
	return in, plan
}

// TestPlanRolloutInvariants checks the invariants over every combination of a
// small set of versions and grants, including invalid ones.
func TestPlanRolloutInvariants(t *testing.T) {
	v1 := rolloutVersion(t, "1", "api.nbp.pl")
	v2 := rolloutVersion(t, "2", "api.nbp.pl", "static.nbp.pl")
	view := rolloutVersion(t, "3")
	view.Manifest.Capabilities = []Capability{CapabilityView}
	broken := &Version{Name: "nbp-fx", Manifest: Manifest{Egress: []string{"*.x"}, Secrets: []SecretMount{{Name: "x", MountPath: "/"}}}}
	stranger := rolloutVersion(t, "5", "api.nbp.pl")
	stranger.Name = "other"
	slotted := rolloutVersion(t, "6", "api.nbp.pl")
	slotted.Manifest.OwnerEgress = 1
	big := rolloutVersion(t, "7", "api.nbp.pl")
	big.Manifest.Resources = Resources{Memory: "1Gi", CPU: "2", Tmp: "256Mi"}
	small := rolloutVersion(t, "8", "api.nbp.pl")
	small.Manifest.Resources = Resources{Memory: "64Mi", CPU: "100m"}
	versions := []*Version{nil, v1, v2, view, broken, stranger, slotted, big, small}
	rebound := rolloutGrant("static.nbp.pl")
	rebound.Secrets[0].SecretName = "nbp-token-2"
	grants := []*Grant{
		nil, rolloutGrant(), rolloutGrant("api.nbp.pl"), rolloutGrant("api.nbp.pl", "static.nbp.pl"), rebound,
		withCaps(rolloutGrant("api.nbp.pl"), CapabilityView), withCaps(rolloutGrant("api.nbp.pl")),
		rolloutGrant("*.nbp.pl"), {Name: "other", Capabilities: []Capability{CapabilityConnector}},
		withOwner(rolloutGrant("api.nbp.pl"), "cloud.example.com"), withOwner(rolloutGrant("api.nbp.pl"), "cloud.example.com", "nas.example.org"),
		withOwner(rolloutGrant(), "api.nbp.pl"),
		withResources(rolloutGrant("api.nbp.pl"), Resources{Memory: "512Mi"}),
		withResources(rolloutGrant("api.nbp.pl"), Resources{Memory: "1Gi", CPU: "2", Tmp: "256Mi"}),
		withResources(rolloutGrant("api.nbp.pl"), Resources{Memory: "64Mi"}),
	}
	seen := map[RolloutOutcome]bool{}
	for ci, cur := range versions {
		for pi, prev := range versions {
			for gi, g := range grants {
				for _, deployable := range []bool{false, true} {
					in := RolloutInput{Current: cur, CurrentDeployable: deployable && cur != nil, Previous: prev, Grant: g}
					t.Run(fmt.Sprintf("current%d/previous%d/grant%d/deployable=%v", ci, pi, gi, deployable), func(t *testing.T) {
						plan := PlanRollout(in)
						checkPlanInvariants(t, in, plan)
						seen[plan.Outcome] = true
					})
				}
			}
		}
	}
	for o := RolloutCurrent; o <= RolloutNotDeployable; o++ {
		if !seen[o] {
			t.Errorf("no combination reached %v", o)
		}
	}
}

func TestRolloutOutcomeString(t *testing.T) {
	tests := map[RolloutOutcome]string{
		RolloutCurrent:          "Current",
		RolloutPrevious:         "Previous",
		RolloutNoGrant:          "NoGrant",
		RolloutInvalidGrant:     "InvalidGrant",
		RolloutAwaitingApproval: "AwaitingApproval",
		RolloutNothingGranted:   "NothingGranted",
		RolloutNotDeployable:    "NotDeployable",
		0:                       "RolloutOutcome(0)",
		99:                      "RolloutOutcome(99)",
	}
	for o, want := range tests {
		t.Run(want, func(t *testing.T) {
			if got := o.String(); got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
		})
	}
}
