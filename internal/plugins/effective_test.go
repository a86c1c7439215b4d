package plugins

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// sameOrDiff fails the test when got differs from want, printing both as JSON
// (-want +got), since go-cmp is not a dependency of this module.
func sameOrDiff(t *testing.T, what string, want, got any) {
	t.Helper()
	if reflect.DeepEqual(want, got) {
		return
	}
	w, _ := json.MarshalIndent(want, "", "  ")
	g, _ := json.MarshalIndent(got, "", "  ")
	t.Errorf("%s mismatch\n-want %s\n+got  %s", what, w, g)
}

// effView is EffectivePermissions with its fields exported, for comparing.
type effView struct {
	Name         string
	Capabilities []Capability
	Egress       []string
	Secrets      []SecretBinding
	DataTiers    []string
}

func viewOf(e EffectivePermissions) effView {
	return effView{e.Name(), e.Capabilities(), e.Egress(), e.Secrets(), e.DataTiers()}
}

// effPlugin is a connector asking for two hosts, two Secret slots and a tier.
func effPlugin() Plugin {
	return Plugin{
		Name:  "ibkr-main",
		Image: "ghcr.io/arkadiuss/openfief/ibkr-flex@" + testDigest,
		Manifest: Manifest{
			Capabilities: []Capability{CapabilityConnector},
			Egress:       []string{"ndcdyn.interactivebrokers.com", "gdcdyn.interactivebrokers.com:443"},
			Secrets: []SecretMount{
				{Name: "ibkr-flex-credentials", MountPath: "/etc/openfief/ibkr"},
				{Name: "ibkr-flex-query", MountPath: "/etc/openfief/query"},
			},
			DataTiers: []string{"transactions"},
		},
	}
}

// effGrant approves everything effPlugin asks for.
func effGrant() Grant {
	return Grant{
		Name:         "ibkr-main",
		Capabilities: []Capability{CapabilityConnector},
		Egress:       []string{"gdcdyn.interactivebrokers.com", "ndcdyn.interactivebrokers.com:443"},
		Secrets:      []SecretGrant{{Name: "ibkr-flex-query"}, {Name: "ibkr-flex-credentials"}},
		DataTiers:    []string{"transactions"},
	}
}

func TestEffective(t *testing.T) {
	full := effView{
		Name:         "ibkr-main",
		Capabilities: []Capability{CapabilityConnector},
		Egress:       []string{"gdcdyn.interactivebrokers.com:443", "ndcdyn.interactivebrokers.com:443"},
		Secrets: []SecretBinding{
			{Slot: "ibkr-flex-credentials", SecretName: "ibkr-flex-credentials", MountPath: "/etc/openfief/ibkr"},
			{Slot: "ibkr-flex-query", SecretName: "ibkr-flex-query", MountPath: "/etc/openfief/query"},
		},
		DataTiers: []string{"transactions"},
	}
	tests := map[string]struct {
		plugin  func(p *Plugin)
		grant   func(g *Grant)
		want    effView
		wantErr error
	}{
		"grant approving exactly the request gives the request": {
			want: full,
		},
		"grant approving more adds nothing": {
			grant: func(g *Grant) {
				g.Capabilities = append(g.Capabilities, CapabilityView)
				g.Egress = append(g.Egress, "evil.example.com")
				g.Secrets = append(g.Secrets, SecretGrant{Name: "other-secret"})
				g.DataTiers = append(g.DataTiers, "holdings")
			},
			want: full,
		},
		"request beyond the grant gets nothing": {
			grant: func(g *Grant) {
				g.Egress = g.Egress[:1]
				g.Secrets = g.Secrets[1:]
				g.DataTiers = nil
			},
			want: effView{
				Name:         "ibkr-main",
				Capabilities: []Capability{CapabilityConnector},
				Egress:       []string{"gdcdyn.interactivebrokers.com:443"},
				Secrets:      []SecretBinding{{Slot: "ibkr-flex-credentials", SecretName: "ibkr-flex-credentials", MountPath: "/etc/openfief/ibkr"}},
			},
		},
		"hosts compare in canonical form": {
			plugin: func(p *Plugin) { p.Manifest.Egress = []string{"API.Example.COM", "bücher.example:8443"} },
			grant:  func(g *Grant) { g.Egress = []string{"api.example.com:443", "xn--bcher-kva.example:8443"} },
			want: func() effView {
				v := full
				v.Egress = []string{"api.example.com:443", "xn--bcher-kva.example:8443"}
				return v
			}(),
		},
		"another port is another host": {
			plugin: func(p *Plugin) { p.Manifest.Egress = []string{"api.example.com:8443"} },
			grant:  func(g *Grant) { g.Egress = []string{"api.example.com"} },
			want: func() effView {
				v := full
				v.Egress = nil
				return v
			}(),
		},
		"a bound slot mounts the owner's Secret at the manifest's path": {
			grant: func(g *Grant) { g.Secrets[1].SecretName = "ibkr-account-2" },
			want: func() effView {
				v := full
				v.Secrets = []SecretBinding{
					{Slot: "ibkr-flex-credentials", SecretName: "ibkr-account-2", MountPath: "/etc/openfief/ibkr"},
					{Slot: "ibkr-flex-query", SecretName: "ibkr-flex-query", MountPath: "/etc/openfief/query"},
				}
				return v
			}(),
		},
		"a moved mount needs no new approval": {
			plugin: func(p *Plugin) { p.Manifest.Secrets[0].MountPath = "/etc/ibkr/v2" },
			want: func() effView {
				v := full
				v.Secrets = []SecretBinding{
					{Slot: "ibkr-flex-credentials", SecretName: "ibkr-flex-credentials", MountPath: "/etc/ibkr/v2"},
					{Slot: "ibkr-flex-query", SecretName: "ibkr-flex-query", MountPath: "/etc/openfief/query"},
				}
				return v
			}(),
		},
		"two capabilities, one granted": {
			plugin: func(p *Plugin) { p.Manifest.Capabilities = []Capability{CapabilityView, CapabilityConnector} },
			want:   full,
		},
		"no requested capability granted": {
			grant:   func(g *Grant) { g.Capabilities = []Capability{CapabilityView} },
			wantErr: ErrNoCapabilityGranted,
		},
		"grant without capabilities": {
			grant:   func(g *Grant) { g.Capabilities = nil },
			wantErr: ErrNoCapabilityGranted,
		},
		"grant of another instance": {
			grant:   func(g *Grant) { g.Name = "ibkr-second" },
			wantErr: ErrGrantMismatch,
		},
		"invalid entries are dropped, never granted": {
			plugin: func(p *Plugin) {
				p.Manifest.Capabilities = []Capability{CapabilityConnector, CapabilityConnector, "root"}
				p.Manifest.Egress = []string{"*.example.com", "10.0.0.1", "core", "", "api.example.com", "api.example.com:443"}
				p.Manifest.Secrets = append(p.Manifest.Secrets,
					SecretMount{Name: "ibkr-flex-query", MountPath: "/elsewhere"},
					SecretMount{Name: "Bad_Name", MountPath: "/etc/bad"},
					SecretMount{Name: "tokens", MountPath: "/var/run/secrets/openfief"},
					SecretMount{Name: "rebound", MountPath: "/etc/rebound"})
				p.Manifest.DataTiers = []string{"transactions", "transactions", "bad tier!"}
			},
			grant: func(g *Grant) {
				g.Capabilities = []Capability{CapabilityConnector, "root"}
				g.Egress = []string{"*.example.com", "10.0.0.1", "core", "", "api.example.com"}
				g.Secrets = append(g.Secrets, SecretGrant{Name: "ibkr-flex-query", SecretName: "ignored"},
					SecretGrant{Name: "Bad_Name"}, SecretGrant{Name: "tokens"}, SecretGrant{Name: "rebound", SecretName: "../etc"})
				g.DataTiers = []string{"transactions", "bad tier!"}
			},
			want: effView{
				Name:         "ibkr-main",
				Capabilities: []Capability{CapabilityConnector},
				Egress:       []string{"api.example.com:443"},
				Secrets:      full.Secrets,
				DataTiers:    []string{"transactions"},
			},
		},
		"zero plugin and zero grant": {
			plugin:  func(p *Plugin) { *p = Plugin{} },
			grant:   func(g *Grant) { *g = Grant{} },
			wantErr: ErrNoCapabilityGranted,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, g := effPlugin(), effGrant()
			if tc.plugin != nil {
				tc.plugin(&p)
			}
			if tc.grant != nil {
				tc.grant(&g)
			}
			got, err := Effective(p, g)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Effective error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !got.IsZero() {
					t.Errorf("Effective returned %v beside error %v", got, err)
				}
				return
			}
			sameOrDiff(t, "effective permissions", tc.want, viewOf(got))
		})
	}
}

// Two instances of one manifest, whose grants bind the slot to different
// Secrets, mount different Secrets (OF-1, the D-48 gap).
func TestEffectivePerInstanceSecrets(t *testing.T) {
	mount := func(instance, secret string) SecretBinding {
		p := effPlugin()
		p.Name = instance
		g := effGrant()
		g.Name = instance
		g.Secrets = []SecretGrant{{Name: "ibkr-flex-credentials", SecretName: secret}}
		e, err := Effective(p, g)
		if err != nil {
			t.Fatal(err)
		}
		return e.Secrets()[0]
	}
	a, b := mount("ibkr-joint", "ibkr-joint-credentials"), mount("ibkr-ira", "ibkr-ira-credentials")
	if a.SecretName == b.SecretName || a.Slot != b.Slot || a.MountPath != b.MountPath {
		t.Errorf("instances mount %+v and %+v; want one slot and path, two Secrets", a, b)
	}
}

func TestEffectiveAccessorsCopy(t *testing.T) {
	e, err := Effective(effPlugin(), effGrant())
	if err != nil {
		t.Fatal(err)
	}
	before := viewOf(e)
	e.Capabilities()[0] = CapabilityView
	e.Egress()[0] = "evil.example.com:443"
	e.Secrets()[0].SecretName = "someone-elses"
	e.DataTiers()[0] = "everything"
	sameOrDiff(t, "after writing to accessor results", before, viewOf(e))
	if !e.HasEgress() || !e.HasCapability(CapabilityConnector) || e.HasCapability(CapabilityView) {
		t.Errorf("HasEgress/HasCapability disagree with %v", e)
	}
	var zero EffectivePermissions
	if !zero.IsZero() || zero.HasEgress() || zero.Capabilities() != nil {
		t.Errorf("zero EffectivePermissions grants something: %v", zero)
	}
}

func TestEffectivePermissionsEqual(t *testing.T) {
	base, _ := Effective(effPlugin(), effGrant())
	shuffled := effPlugin()
	shuffled.Manifest.Egress[0], shuffled.Manifest.Egress[1] = shuffled.Manifest.Egress[1], shuffled.Manifest.Egress[0]
	shuffled.Manifest.Secrets[0], shuffled.Manifest.Secrets[1] = shuffled.Manifest.Secrets[1], shuffled.Manifest.Secrets[0]
	same, _ := Effective(shuffled, effGrant())
	narrowed := effGrant()
	narrowed.Egress = narrowed.Egress[:1]
	less, _ := Effective(effPlugin(), narrowed)
	rebound := effGrant()
	rebound.Secrets[0].SecretName = "other"
	other, _ := Effective(effPlugin(), rebound)

	tests := map[string]struct {
		a, b EffectivePermissions
		want bool
	}{
		"same input in another order": {base, same, true},
		"one host fewer":              {base, less, false},
		"another Secret bound":        {base, other, false},
		"zero and non-zero":           {base, EffectivePermissions{}, false},
		"zero and zero":               {EffectivePermissions{}, EffectivePermissions{}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.Equal(tc.b); got != tc.want {
				t.Errorf("Equal = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEffectivePermissionsString(t *testing.T) {
	e, _ := Effective(effPlugin(), effGrant())
	want := "ibkr-main: capabilities: connector; egress: gdcdyn.interactivebrokers.com:443, ndcdyn.interactivebrokers.com:443; " +
		"secrets: ibkr-flex-credentials=ibkr-flex-credentials@/etc/openfief/ibkr, ibkr-flex-query=ibkr-flex-query@/etc/openfief/query; data tiers: transactions"
	if got := e.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}

func TestNeedsApproval(t *testing.T) {
	g := effGrant()
	tests := map[string]struct {
		manifest func(m *Manifest)
		grant    *Grant
		want     Pending
	}{
		"no grant: everything requested is pending": {
			grant: nil,
			want: Pending{
				Capabilities: []Capability{CapabilityConnector},
				Egress:       []string{"gdcdyn.interactivebrokers.com:443", "ndcdyn.interactivebrokers.com:443"},
				Secrets:      []string{"ibkr-flex-credentials", "ibkr-flex-query"},
				DataTiers:    []string{"transactions"},
			},
		},
		"everything granted: nothing pending": {
			grant: &g,
		},
		"a new host is exactly what is pending": {
			manifest: func(m *Manifest) { m.Egress = append(m.Egress, "API.new-host.example") },
			grant:    &g,
			want:     Pending{Egress: []string{"api.new-host.example:443"}},
		},
		"one of each kind pending": {
			manifest: func(m *Manifest) {
				m.Capabilities = append(m.Capabilities, CapabilityView)
				m.Egress = append(m.Egress, "a.example.com:8443")
				m.Secrets = append(m.Secrets, SecretMount{Name: "extra", MountPath: "/etc/extra"})
				m.DataTiers = append(m.DataTiers, "holdings")
			},
			grant: &g,
			want: Pending{
				Capabilities: []Capability{CapabilityView},
				Egress:       []string{"a.example.com:8443"},
				Secrets:      []string{"extra"},
				DataTiers:    []string{"holdings"},
			},
		},
		"hosts already granted in another spelling are not pending": {
			manifest: func(m *Manifest) { m.Egress = []string{"GDCDYN.interactivebrokers.com:443"} },
			grant:    &g,
		},
		"a grant approving more leaves nothing pending": {
			manifest: func(m *Manifest) { *m = Manifest{Capabilities: []Capability{CapabilityConnector}} },
			grant:    &g,
		},
		"invalid requested entries are left out": {
			manifest: func(m *Manifest) { m.Egress = []string{"*.example.com", "10.1.2.3"} },
			grant:    &g,
		},
		"empty manifest and no grant": {
			manifest: func(m *Manifest) { *m = Manifest{} },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := effPlugin().Manifest
			if tc.manifest != nil {
				tc.manifest(&m)
			}
			got := NeedsApproval(m, tc.grant)
			sameOrDiff(t, "pending", tc.want, got)
			if got.IsEmpty() != reflect.DeepEqual(tc.want, Pending{}) {
				t.Errorf("IsEmpty() = %v for %+v", got.IsEmpty(), got)
			}
		})
	}
}

func TestPendingString(t *testing.T) {
	tests := map[string]struct {
		p    Pending
		want string
	}{
		"nothing":    {Pending{}, "nothing"},
		"one host":   {Pending{Egress: []string{"api.example.com:443"}}, "egress: api.example.com:443"},
		"every kind": {NeedsApproval(effPlugin().Manifest, nil), "capabilities: connector; egress: gdcdyn.interactivebrokers.com:443, ndcdyn.interactivebrokers.com:443; secrets: ibkr-flex-credentials, ibkr-flex-query; data tiers: transactions"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.p.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}
