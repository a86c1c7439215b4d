package plugins

import (
	"errors"
	"strings"
	"testing"
)

// webdavView is a view plugin that exports to the owner's own server: it
// requests no host and asks for slots hosts of the owner's choosing.
func webdavView(slots int, requested ...string) Plugin {
	return Plugin{
		Name:  "webdav",
		Image: "ghcr.io/arkadiuss/openfief/webdav@" + testDigest,
		Manifest: Manifest{
			Capabilities: []Capability{CapabilityView},
			Egress:       requested,
			OwnerEgress:  slots,
		},
	}
}

// webdavGrant approves the view with the hosts egress (requested ones) and
// owner (the owner's own).
func webdavGrant(egress, owner []string) Grant {
	return Grant{Name: "webdav", Capabilities: []Capability{CapabilityView}, Egress: egress, OwnerEgress: owner}
}

// TestEffectiveOwnerEgress checks the owner's hosts (OF-36): they run when
// they fit the manifest's slots, a grant with more of them than slots is
// refused whole, and the vendor's side cannot turn a grant's host into one.
func TestEffectiveOwnerEgress(t *testing.T) {
	tests := map[string]struct {
		plugin  Plugin
		grant   Grant
		want    []string
		wantErr error
		// detail is part of the refusal's text, when one is expected.
		detail string
	}{
		"one slot, one host of the owner's": {
			plugin: webdavView(1), grant: webdavGrant(nil, []string{"cloud.example.com"}),
			want: []string{"cloud.example.com:443"},
		},
		"slots need not all be filled": {
			plugin: webdavView(3), grant: webdavGrant(nil, []string{"nas.example.org:8443"}),
			want: []string{"nas.example.org:8443"},
		},
		"no host of the owner's: none": {
			plugin: webdavView(1), grant: webdavGrant(nil, nil),
		},
		"owner hosts beside requested ones": {
			plugin: webdavView(1, "api.vendor.example"),
			grant:  webdavGrant([]string{"api.vendor.example"}, []string{"cloud.example.com"}),
			want:   []string{"api.vendor.example:443", "cloud.example.com:443"},
		},
		"owner hosts compare in canonical form": {
			plugin: webdavView(1, "cloud.example.com:443"),
			grant:  webdavGrant(nil, []string{"Cloud.Example.com"}),
			want:   []string{"cloud.example.com:443"},
		},
		"an owner host the manifest requests fills no slot": {
			plugin: webdavView(1, "cloud.example.com"),
			grant:  webdavGrant(nil, []string{"Cloud.Example.com", "nas.example.org"}),
			want:   []string{"cloud.example.com:443", "nas.example.org:443"},
		},
		"too many for the slots: refused, none chosen": {
			plugin: webdavView(1), grant: webdavGrant(nil, []string{"b.example.com", "a.example.com"}),
			wantErr: ErrTooManyOwnerHosts, detail: "grant.ownerEgress: more hosts of the owner's choosing than the manifest allows: 2 (a.example.com:443, b.example.com:443), the manifest allows 1; remove 1 from the grant",
		},
		"upgrade to a version without slots: refused": {
			plugin: webdavView(0), grant: webdavGrant(nil, []string{"cloud.example.com"}),
			wantErr: ErrTooManyOwnerHosts, detail: "1 (cloud.example.com:443), the manifest allows 0; remove 1 from the grant",
		},
		"upgrade to fewer slots: refused": {
			plugin: webdavView(1), grant: webdavGrant(nil, []string{"a.example.com", "b.example.com", "c.example.com"}),
			wantErr: ErrTooManyOwnerHosts, detail: "3 (a.example.com:443, b.example.com:443, c.example.com:443), the manifest allows 1; remove 2",
		},
		"a host in the grant's egress list is never the owner's": {
			plugin: webdavView(1), grant: webdavGrant([]string{"leftover.vendor.example"}, nil),
		},
		"a leftover requested host does not take a slot": {
			plugin: webdavView(1), grant: webdavGrant([]string{"leftover.vendor.example"}, []string{"cloud.example.com"}),
			want: []string{"cloud.example.com:443"},
		},
		"an out-of-range slot count allows none": {
			plugin: webdavView(MaxOwnerEgress + 1), grant: webdavGrant(nil, []string{"cloud.example.com"}),
			wantErr: ErrTooManyOwnerHosts,
		},
		"a negative slot count allows none": {
			plugin: webdavView(-1), grant: webdavGrant(nil, []string{"cloud.example.com"}),
			wantErr: ErrTooManyOwnerHosts,
		},
		"an owner host that does not canonicalise is dropped": {
			plugin: webdavView(1), grant: webdavGrant(nil, []string{"10.0.0.1", "*.example.com", "cloud.example.com"}),
			want: []string{"cloud.example.com:443"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Effective(tc.plugin, tc.grant)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Effective error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != "grant.ownerEgress" {
					t.Errorf("error %v is not a *FieldError on grant.ownerEgress", err)
				}
				if !strings.Contains(err.Error(), tc.detail) {
					t.Errorf("error %q does not say %q", err, tc.detail)
				}
				if !got.IsZero() {
					t.Errorf("Effective returned %v beside error %v", got, err)
				}
				return
			}
			sameOrDiff(t, "effective egress", tc.want, nilIfEmpty(got.Egress()))
		})
	}
}

// TestNeedsApprovalOwnerEgress checks a requested host the owner lists among
// their own is granted, and that owner hosts are never pending.
func TestNeedsApprovalOwnerEgress(t *testing.T) {
	m := webdavView(1, "cloud.example.com:443", "api.vendor.example").Manifest
	g := webdavGrant(nil, []string{"Cloud.Example.com", "nas.example.org"})
	sameOrDiff(t, "pending", Pending{Egress: []string{"api.vendor.example:443"}}, NeedsApproval(m, &g))
	sameOrDiff(t, "owner hosts", []string{"nas.example.org:443"}, OwnerHosts(m, &g))
	if got := FreeOwnerSlots(m, &g); got != 0 {
		t.Errorf("FreeOwnerSlots = %d, want 0", got)
	}
	if got := FreeOwnerSlots(webdavView(2).Manifest, nil); got != 2 {
		t.Errorf("FreeOwnerSlots without a grant = %d, want 2", got)
	}
	over := webdavGrant(nil, []string{"a.example.com", "b.example.com"})
	if got := FreeOwnerSlots(webdavView(1).Manifest, &over); got != 0 {
		t.Errorf("FreeOwnerSlots of a grant over its slots = %d, want 0", got)
	}
}

// TestApproveOwnerEgress checks `--host` for a host the manifest does not
// request (OF-36): accepted into the grant's ownerEgress while a slot is
// free, refused naming the rule when none is, and never added by approving
// everything pending.
func TestApproveOwnerEgress(t *testing.T) {
	m := webdavView(1).Manifest
	two := webdavView(2, "api.vendor.example").Manifest
	granted := webdavGrant(nil, []string{"cloud.example.com"})
	cases := map[string]struct {
		m       Manifest
		current *Grant
		sel     Selection
		// want is the grant after, and owner what the approval adds.
		want  Grant
		owner []string
		field string
		err   error
	}{
		"a host of the owner's choosing into a free slot": {
			m: m, current: &Grant{Name: "webdav", Capabilities: []Capability{CapabilityView}},
			sel:   Selection{Egress: []string{"Cloud.Example.com"}},
			want:  webdavGrant(nil, []string{"cloud.example.com:443"}),
			owner: []string{"cloud.example.com:443"},
		},
		"first approval: the capability and the owner's host": {
			m: m, sel: Selection{Capabilities: []Capability{CapabilityView}, Egress: []string{"cloud.example.com"}},
			want:  webdavGrant(nil, []string{"cloud.example.com:443"}),
			owner: []string{"cloud.example.com:443"},
		},
		"a requested host goes to egress, the other to a slot": {
			m: two, current: &Grant{Name: "webdav", Capabilities: []Capability{CapabilityView}},
			sel:   Selection{Egress: []string{"nas.example.org:8443", "api.vendor.example", "nas.example.org:8443"}},
			want:  webdavGrant([]string{"api.vendor.example:443"}, []string{"nas.example.org:8443"}),
			owner: []string{"nas.example.org:8443"},
		},
		"no free slot": {
			m: m, current: &granted, sel: Selection{Egress: []string{"nas.example.org"}},
			field: "selection.egress[0]", err: ErrNoOwnerSlot,
		},
		"more hosts than slots in one selection": {
			m: m, current: &Grant{Name: "webdav", Capabilities: []Capability{CapabilityView}},
			sel:   Selection{Egress: []string{"a.example.com", "b.example.com"}},
			field: "selection.egress[1]", err: ErrNoOwnerSlot,
		},
		"a manifest without slots: not requested": {
			m: webdavView(0).Manifest, current: &Grant{Name: "webdav", Capabilities: []Capability{CapabilityView}},
			sel:   Selection{Egress: []string{"cloud.example.com"}},
			field: "selection.egress[0]", err: ErrNotRequested,
		},
		"the owner's host again": {
			m: m, current: &granted, sel: Selection{Egress: []string{"cloud.example.com:443"}},
			field: "selection.egress[0]", err: ErrAlreadyGranted,
		},
		"approving everything pending adds no owner host": {
			m: m, want: Grant{Name: "webdav", Capabilities: []Capability{CapabilityView}},
		},
		"approving everything pending keeps the owner's hosts": {
			m: two, current: &granted,
			want: webdavGrant([]string{"api.vendor.example:443"}, []string{"cloud.example.com"}),
		},
		"nothing pending and a full slot: nothing to do": {
			m: m, current: &granted, field: "selection", err: ErrNothingPending,
		},
		"an IP literal is no host of anyone's choosing": {
			m: m, sel: Selection{Egress: []string{"192.168.1.10"}},
			field: "selection.egress[0]", err: ErrInvalidEgressHost,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := Approve("webdav", tc.m, tc.current, tc.sel)
			if tc.err != nil {
				trCheckErr(t, err, tc.err, tc.field)
				return
			}
			if err != nil {
				t.Fatalf("Approve: %v", err)
			}
			sameOrDiff(t, "grant", tc.want, a.Grant)
			sameOrDiff(t, "owner hosts added", tc.owner, a.OwnerEgress)
			if _, err := Effective(Plugin{Name: "webdav", Manifest: tc.m}, a.Grant); err != nil {
				t.Errorf("the approved grant does not run: %v", err)
			}
		})
	}
	t.Run("the refusal names the host, the slots and who holds them", func(t *testing.T) {
		_, err := Approve("webdav", m, &granted, Selection{Egress: []string{"NAS.example.org"}})
		want := "selection.egress[0]: no free slot for a host of your choosing: the manifest does not request nas.example.org:443 and allows 1 host(s) of your choosing, taken by cloud.example.com:443"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q, want it to start %q", err, want)
		}
	})
}

// TestGrantValidateOwnerEgress checks the grant's own rules for the owner's
// hosts: canonical, at most MaxOwnerEgress, none twice, none also in egress.
func TestGrantValidateOwnerEgress(t *testing.T) {
	many := make([]string, MaxOwnerEgress+1)
	for i := range many {
		many[i] = strings.Repeat("h", i+1) + ".example.com"
	}
	tests := map[string]struct {
		grant Grant
		field string
		err   error
	}{
		"valid":                {grant: webdavGrant([]string{"api.vendor.example"}, []string{"cloud.example.com", "nas.example.org:8443"})},
		"at most eight":        {grant: webdavGrant(nil, many), field: "grant.ownerEgress", err: ErrInvalidEgressHost},
		"a wildcard":           {grant: webdavGrant(nil, []string{"*.example.com"}), field: "grant.ownerEgress[0]", err: ErrInvalidEgressHost},
		"an IP literal":        {grant: webdavGrant(nil, []string{"10.1.2.3"}), field: "grant.ownerEgress[0]", err: ErrInvalidEgressHost},
		"a single label":       {grant: webdavGrant(nil, []string{"nas"}), field: "grant.ownerEgress[0]", err: ErrInvalidEgressHost},
		"twice, spelt apart":   {grant: webdavGrant(nil, []string{"cloud.example.com", "Cloud.Example.com:443"}), field: "grant.ownerEgress[1]", err: ErrDuplicate},
		"also in egress":       {grant: webdavGrant([]string{"Cloud.example.com"}, []string{"cloud.example.com:443"}), field: "grant.ownerEgress[0]", err: ErrDuplicate},
		"unsafe text":          {grant: webdavGrant(nil, []string{"cloud.example.com\u202e"}), field: "grant.ownerEgress[0]", err: ErrUnsafeText},
		"another port is fine": {grant: webdavGrant([]string{"cloud.example.com"}, []string{"cloud.example.com:8443"})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.grant.Validate()
			if tc.err == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			trCheckErr(t, err, tc.err, tc.field)
		})
	}
}

// TestManifestOwnerEgress checks the slot count's range, that Equal compares
// it, and how the signed label carries it.
func TestManifestOwnerEgress(t *testing.T) {
	for _, n := range []int{-1, MaxOwnerEgress + 1} {
		trCheckErr(t, webdavView(n).Manifest.Validate(), ErrInvalidOwnerEgress, "manifest.ownerEgress")
	}
	for _, n := range []int{0, 1, MaxOwnerEgress} {
		if err := webdavView(n).Manifest.Validate(); err != nil {
			t.Errorf("ownerEgress %d: %v", n, err)
		}
	}
	if webdavView(1).Manifest.Equal(webdavView(2).Manifest) || webdavView(0).Manifest.Equal(webdavView(1).Manifest) {
		t.Error("manifests with different owner egress slots are Equal")
	}

	got, err := ParseManifestLabel(`{"capabilities":["view"],"ownerEgress":1}`)
	if err != nil || got.OwnerEgress != 1 || len(got.Egress) != 0 {
		t.Fatalf("ParseManifestLabel = %+v, %v; want one owner slot", got, err)
	}
	for label, want := range map[string]int{
		`{"capabilities":["view"]}`:                             0,
		`{"capabilities":["view"],"ownerEgress":0}`:             0,
		`{"capabilities":["view"],"ownerEgress":null}`:          0,
		`{"capabilities":["view"],"ownerEgress":8}`:             8,
		`{"capabilities":["view"],"ownerEgress":-0}`:            0,
		`{"capabilities":["view"],"egress":[],"ownerEgress":2}`: 2,
	} {
		if got, err := ParseManifestLabel(label); err != nil || got.OwnerEgress != want {
			t.Errorf("ParseManifestLabel(%s) = %d, %v; want %d", label, got.OwnerEgress, err, want)
		}
	}
	refused := map[string]struct {
		label string
		err   error
		field string
	}{
		"nine":             {`{"capabilities":["view"],"ownerEgress":9}`, ErrInvalidOwnerEgress, "label.ownerEgress"},
		"negative":         {`{"capabilities":["view"],"ownerEgress":-1}`, ErrInvalidOwnerEgress, "label.ownerEgress"},
		"a fraction":       {`{"capabilities":["view"],"ownerEgress":1.5}`, nil, "label.ownerEgress"},
		"written as 1.0":   {`{"capabilities":["view"],"ownerEgress":1.0}`, nil, "label.ownerEgress"},
		"an exponent":      {`{"capabilities":["view"],"ownerEgress":1e0}`, nil, "label.ownerEgress"},
		"a string":         {`{"capabilities":["view"],"ownerEgress":"1"}`, nil, "label.ownerEgress"},
		"a list of hosts":  {`{"capabilities":["view"],"ownerEgress":["cloud.example.com"]}`, nil, "label.ownerEgress"},
		"huge":             {`{"capabilities":["view"],"ownerEgress":18446744073709551617}`, nil, "label.ownerEgress"},
		"another spelling": {`{"capabilities":["view"],"OwnerEgress":1}`, nil, "label"},
		"repeated":         {`{"capabilities":["view"],"ownerEgress":0,"ownerEgress":1}`, nil, "label"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := ParseManifestLabel(tc.label)
			trCheckErr(t, err, ErrInvalidLabel, tc.field)
			if tc.err != nil {
				trCheckErr(t, err, tc.err, tc.field)
			}
		})
	}
}
