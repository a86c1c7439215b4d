package plugins

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMemory(t *testing.T) {
	ok := map[string]int64{
		"1Mi": 1 << 20, "64Mi": 64 << 20, "1024Mi": 1 << 30, "1Gi": 1 << 30, "2Gi": 2 << 30, "99999Mi": 99999 << 20,
	}
	for in, want := range ok {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "Mi", "0Mi", "01Mi", "1", "1M", "1G", "1Ki", "1Ti", "1mi", "1.5Gi", "1e3Mi", "+1Mi", "-1Mi", " 1Mi", "1Mi ",
		"100000Mi", "123456789Mi", "1Mi\x00", "１Mi", "1Gi1",
	} {
		if got, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseCPU(t *testing.T) {
	ok := map[string]int64{"1": 1000, "2": 2000, "99": 99000, "1m": 1, "250m": 250, "1500m": 1500, "99999m": 99999}
	for in, want := range ok {
		if got, err := ParseCPU(in); err != nil || got != want {
			t.Errorf("ParseCPU(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "0", "0m", "01", "100", "0.5", ".5", "1.5", "1e3m", "1k", "1M", "1Mi", "-1", "1 ", "100000m", "1u", "1n"} {
		if got, err := ParseCPU(in); err == nil {
			t.Errorf("ParseCPU(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatQuantities(t *testing.T) {
	mem := map[int64]string{1 << 20: "1Mi", 64 << 20: "64Mi", 1 << 30: "1Gi", 1536 << 20: "1536Mi", 3 << 30: "3Gi"}
	for in, want := range mem {
		if got := FormatMemory(in); got != want {
			t.Errorf("FormatMemory(%d) = %q, want %q", in, got, want)
		}
	}
	cpu := map[int64]string{1000: "1", 500: "500m", 1500: "1500m", 2000: "2", 50: "50m"}
	for in, want := range cpu {
		if got := FormatCPU(in); got != want {
			t.Errorf("FormatCPU(%d) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseQuantity checks the two parsers on any text: they never panic, what
// they accept is short, positive and bounded, and writing the value back
// gives text that reads as the same value.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"1Mi", "64Mi", "1Gi", "1024Mi", "1", "250m", "99", "0", "1.5Gi", "1e3", "99999Mi", "100000m", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if b, err := ParseMemory(s); err == nil {
			if len(s) > maxQuantityLen || b < Mi || b > 99999*Gi {
				t.Fatalf("ParseMemory(%q) = %d", s, b)
			}
			if again, err := ParseMemory(FormatMemory(b)); err != nil || again != b {
				t.Fatalf("ParseMemory(FormatMemory(%d)) = %d, %v", b, again, err)
			}
		}
		if m, err := ParseCPU(s); err == nil {
			if len(s) > maxQuantityLen || m < 1 || m > 99000 {
				t.Fatalf("ParseCPU(%q) = %d", s, m)
			}
			if again, err := ParseCPU(FormatCPU(m)); err != nil || again != m {
				t.Fatalf("ParseCPU(FormatCPU(%d)) = %d, %v", m, again, err)
			}
		}
	})
}

func TestEffectiveAndPendingResources(t *testing.T) {
	def := DefaultResourceLimits()
	tests := map[string]struct {
		request, grant Resources
		want           ResourceLimits
		pending        Resources
	}{
		"nothing asked: the defaults, nothing pending": {
			want: def,
		},
		"asked less than the defaults: runs with less, needs no grant": {
			request: Resources{Memory: "64Mi", CPU: "100m", Tmp: "1Mi"},
			want:    ResourceLimits{MemoryBytes: 64 * Mi, CPUMilli: 100, TmpBytes: Mi},
		},
		"asked more, not granted: the defaults, the rest pending": {
			request: Resources{Memory: "512Mi", CPU: "1", Tmp: "256Mi"},
			want:    def,
			pending: Resources{Memory: "512Mi", CPU: "1", Tmp: "256Mi"},
		},
		"asked more, granted exactly": {
			request: Resources{Memory: "512Mi", CPU: "1", Tmp: "256Mi"},
			grant:   Resources{Memory: "512Mi", CPU: "1000m", Tmp: "256Mi"},
			want:    ResourceLimits{MemoryBytes: 512 * Mi, CPUMilli: 1000, TmpBytes: 256 * Mi},
		},
		"granted more than asked adds nothing": {
			request: Resources{Memory: "256Mi"},
			grant:   Resources{Memory: "2Gi", CPU: "2", Tmp: "1Gi"},
			want:    ResourceLimits{MemoryBytes: 256 * Mi, CPUMilli: DefaultCPUMilli, TmpBytes: DefaultTmp},
		},
		"granted part of what is asked: at most the grant, the rest pending": {
			request: Resources{Memory: "1Gi", CPU: "2"},
			grant:   Resources{Memory: "512Mi", CPU: "2"},
			want:    ResourceLimits{MemoryBytes: 512 * Mi, CPUMilli: 2000, TmpBytes: DefaultTmp},
			pending: Resources{Memory: "1Gi"},
		},
		"written in other units, the same values": {
			request: Resources{Memory: "1024Mi", CPU: "1500m"},
			grant:   Resources{Memory: "1Gi", CPU: "1500m"},
			want:    ResourceLimits{MemoryBytes: Gi, CPUMilli: 1500, TmpBytes: DefaultTmp},
		},
		"a grant below the default (invalid) approves the default": {
			request: Resources{Memory: "128Mi"},
			grant:   Resources{Memory: "32Mi"},
			want:    def,
		},
		"above the maximum (invalid) never runs above it": {
			request: Resources{Memory: "8Gi", CPU: "8", Tmp: "8Gi"},
			grant:   Resources{Memory: "8Gi", CPU: "8", Tmp: "8Gi"},
			want:    ResourceLimits{MemoryBytes: MaxMemory, CPUMilli: MaxCPUMilli, TmpBytes: MaxTmp},
			pending: Resources{Memory: "8Gi", CPU: "8", Tmp: "8Gi"},
		},
		"unreadable quantities (invalid) are the defaults": {
			request: Resources{Memory: "lots", CPU: "0.5"},
			grant:   Resources{Memory: "all"},
			want:    def,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, g := effPlugin(), effGrant()
			p.Manifest.Resources, g.Resources = tc.request, tc.grant
			e, err := Effective(p, g)
			if err != nil {
				t.Fatal(err)
			}
			sameOrDiff(t, "effective resources", tc.want, e.Resources())
			sameOrDiff(t, "pending resources", tc.pending, NeedsApproval(p.Manifest, &g).Resources)
			if got := NeedsApproval(p.Manifest, &g).IsEmpty(); got != tc.pending.IsZero() {
				t.Errorf("IsEmpty() = %v with pending %v", got, tc.pending)
			}
		})
	}
}

func TestNeedsApprovalResourcesWithoutGrant(t *testing.T) {
	m := effPlugin().Manifest
	m.Resources = Resources{Memory: "1024Mi", CPU: "200m"}
	got := NeedsApproval(m, nil)
	sameOrDiff(t, "pending without a grant", Resources{Memory: "1Gi"}, got.Resources)
	if want := "resources: memory 1Gi"; !strings.HasSuffix(got.String(), "; "+want) {
		t.Errorf("String() = %q, want it to end with %q", got.String(), want)
	}
	if got := (Pending{Resources: Resources{CPU: "1"}}).String(); got != "resources: cpu 1" {
		t.Errorf("String() = %q", got)
	}
}

func TestValidateResources(t *testing.T) {
	m := validManifest()
	m.Resources = Resources{Memory: "16Mi", CPU: "0.5", Tmp: "2Gi"}
	got := problemsOf(t, m.Validate())
	want := []problem{
		{"manifest.resources.memory", ErrInvalidResources},
		{"manifest.resources.cpu", ErrInvalidResources},
		{"manifest.resources.tmp", ErrInvalidResources},
	}
	sameOrDiff(t, "manifest problems", want, got)
	if err := m.Validate(); !strings.Contains(err.Error(), "manifest.resources.memory: invalid resources: 16Mi, want 32Mi to 2Gi") {
		t.Errorf("error %q does not name the bounds", err)
	}

	m.Resources = Resources{Memory: "32Mi", CPU: "100m", Tmp: "1Mi"}
	if err := m.Validate(); err != nil {
		t.Errorf("the minima: %v", err)
	}
	m.Resources = Resources{Memory: "2Gi", CPU: "2", Tmp: "1Gi"}
	if err := m.Validate(); err != nil {
		t.Errorf("the maxima: %v", err)
	}
	m.Resources = Resources{Memory: "2049Mi", CPU: "2001m", Tmp: "1025Mi"}
	if got := len(problemsOf(t, m.Validate())); got != 3 {
		t.Errorf("just above the maxima: %d problems, want 3", got)
	}

	g := effGrant()
	g.Resources = Resources{Memory: "64Mi", CPU: "3", Tmp: "64Mi\u202e"}
	sameOrDiff(t, "grant problems", []problem{
		{"grant.resources.memory", ErrInvalidResources},
		{"grant.resources.cpu", ErrInvalidResources},
		{"grant.resources.tmp", ErrUnsafeText},
	}, problemsOf(t, g.Validate()))
	g.Resources = Resources{Memory: "128Mi", CPU: "500m", Tmp: "64Mi"}
	if err := g.Validate(); err != nil {
		t.Errorf("a grant of the defaults: %v", err)
	}
}

func TestParseManifestLabelResources(t *testing.T) {
	m, err := ParseManifestLabel(`{"capabilities":["connector"],"resources":{"memory":"512Mi","cpu":"1","tmp":"256Mi"}}`)
	if err != nil {
		t.Fatal(err)
	}
	sameOrDiff(t, "resources", Resources{Memory: "512Mi", CPU: "1", Tmp: "256Mi"}, m.Resources)
	for label, field := range map[string]string{
		`{"capabilities":["connector"],"resources":{"memory":"512Mi","disk":"1Gi"}}`: "label.resources",
		`{"capabilities":["connector"],"resources":{"Memory":"512Mi"}}`:              "label.resources",
		`{"capabilities":["connector"],"resources":{"memory":512}}`:                  "label.resources.memory",
		`{"capabilities":["connector"],"resources":{"memory":"1Gi","memory":"2Gi"}}`: "label.resources",
		`{"capabilities":["connector"],"resources":{"cpu":"1.5"}}`:                   "label.resources.cpu",
		`{"capabilities":["connector"],"resources":["512Mi"]}`:                       "label.resources",
	} {
		_, err := ParseManifestLabel(label)
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidLabel) || fe.Field != field {
			t.Errorf("ParseManifestLabel(%s) = %v, want an invalid label at %s", label, err, field)
		}
	}
}

func TestManifestEqualResources(t *testing.T) {
	a, b := validManifest(), validManifest()
	a.Resources, b.Resources = Resources{Memory: "1Gi", CPU: "1"}, Resources{Memory: "1024Mi", CPU: "1000m"}
	if !a.Equal(b) {
		t.Error("1Gi and 1024Mi, 1 and 1000m differ")
	}
	for _, r := range []Resources{{Memory: "1Gi"}, {Memory: "1Gi", CPU: "1", Tmp: "64Mi"}, {Memory: "2Gi", CPU: "1"}} {
		b.Resources = r
		if a.Equal(b) {
			t.Errorf("%v equals %v", a.Resources, r)
		}
	}
	a.Resources, b.Resources = Resources{Memory: "lots"}, Resources{Memory: "lots"}
	if a.Equal(b) {
		t.Error("an unreadable quantity equals itself")
	}
}

func TestApproveResources(t *testing.T) {
	m := approvalManifest()
	m.Resources = Resources{Memory: "512Mi", Tmp: "32Mi"}
	all, err := Approve("fx", approvalManifest(), nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	granted := &all.Grant // everything but the resources

	// Naming something else leaves the resources pending.
	if _, err := Approve("fx", m, approvalGranted(), Selection{DataTiers: []string{"rates"}}); !errors.Is(err, ErrAlreadyGranted) {
		t.Fatalf("naming a granted tier: %v", err)
	}
	if a, err := Approve("fx", m, approvalGranted(), Selection{Egress: []string{"static.nbp.pl:8443"}}); err != nil {
		t.Fatalf("naming a host: %v", err)
	} else if !a.Grant.Resources.IsZero() || a.Remaining().Resources != (Resources{Memory: "512Mi"}) {
		t.Errorf("naming a host approved resources %v, left %v", a.Grant.Resources, a.Remaining().Resources)
	}

	a, err := Approve("fx", m, granted, Selection{Resources: true})
	if err != nil {
		t.Fatal(err)
	}
	sameOrDiff(t, "approved", Pending{Resources: Resources{Memory: "512Mi"}}, a.Approved)
	sameOrDiff(t, "grant resources", Resources{Memory: "512Mi"}, a.Grant.Resources)
	if e, err := Effective(Plugin{Name: "fx", Manifest: m}, a.Grant); err != nil || e.Resources().MemoryBytes != 512*Mi || e.Resources().TmpBytes != 32*Mi {
		t.Errorf("after the approval: %v, %v", e, err)
	}
	if !a.Remaining().Resources.IsZero() {
		t.Errorf("remaining %v", a.Remaining())
	}

	_, err = Approve("fx", m, &a.Grant, Selection{Resources: true})
	if !errors.Is(err, ErrAlreadyGranted) {
		t.Errorf("approving them again: %v, want ErrAlreadyGranted", err)
	}
	_, err = Approve("fx", approvalManifest(), granted, Selection{Resources: true})
	if !errors.Is(err, ErrNotRequested) {
		t.Errorf("approving resources not asked for: %v, want ErrNotRequested", err)
	}
	_, err = Approve("fx", m, granted, Selection{All: true, Resources: true})
	if !errors.Is(err, ErrSelectionConflict) {
		t.Errorf("all with resources: %v, want ErrSelectionConflict", err)
	}

	// Everything pending, by default.
	a, err = Approve("fx", m, nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	sameOrDiff(t, "grant resources when approving everything", Resources{Memory: "512Mi"}, a.Grant.Resources)
}

// TestUpgradeAskingMoreResources: a new version asking for more memory waits
// for approval while the previous one keeps running with its own (D-47).
func TestUpgradeAskingMoreResources(t *testing.T) {
	v1 := rolloutVersion(t, "1", "api.nbp.pl")
	v2 := rolloutVersion(t, "2", "api.nbp.pl")
	v2.Manifest.Resources = Resources{Memory: "1Gi"}
	s := rolloutState{spec: v1, deployable: true, grant: rolloutGrant("api.nbp.pl")}
	steps := []struct {
		name    string
		edit    func()
		outcome RolloutOutcome
		run     *Version
		memory  int64
	}{
		{"v1 approved", func() {}, RolloutCurrent, v1, DefaultMemory},
		{"upgrade to v2 asking 1Gi", func() { s.spec = v2 }, RolloutPrevious, v1, DefaultMemory},
		{"owner approves 512Mi only", func() { s.grant = withResources(s.grant, Resources{Memory: "512Mi"}) }, RolloutPrevious, v1, DefaultMemory},
		{"owner approves 1Gi", func() { s.grant = withResources(s.grant, Resources{Memory: "1Gi"}) }, RolloutCurrent, v2, Gi},
		{"owner narrows to the default", func() { s.grant = withResources(s.grant, Resources{}) }, RolloutPrevious, v2, DefaultMemory},
	}
	for i, st := range steps {
		st.edit()
		in, plan := s.reconcile()
		checkPlanInvariants(t, in, plan)
		if plan.Outcome != st.outcome || plan.Run != st.run {
			t.Fatalf("step %d (%s): %v running %s", i+1, st.name, plan.Outcome, versionLabel(plan.Run))
		}
		if got := plan.Effective.Resources().MemoryBytes; got != st.memory {
			t.Fatalf("step %d (%s): memory %s, want %s", i+1, st.name, FormatMemory(got), FormatMemory(st.memory))
		}
	}
}

func TestCompileResources(t *testing.T) {
	p, g := effPlugin(), effGrant()
	p.Manifest.Resources = Resources{Memory: "1Gi", CPU: "2", Tmp: "256Mi"}
	g.Resources = p.Manifest.Resources
	e, err := Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	top := compileTopology()
	w, err := Compile(e, top)
	if err != nil {
		t.Fatal(err)
	}
	want := WorkloadResources{
		MemoryBytes: (1024 + 256) << 20, CPURequestMilli: 50, CPULimitMilli: 2000,
		EphemeralRequestBytes: 16 << 20, EphemeralLimitBytes: 64 << 20, TmpBytes: 256 << 20,
	}
	sameOrDiff(t, "workload resources", want, w.Resources)
	if got := e.String(); !strings.HasSuffix(got, "; resources: memory 1Gi, cpu 2, tmp 256Mi") {
		t.Errorf("String() = %q", got)
	}
}
