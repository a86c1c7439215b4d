package plugins

import (
	"testing"
)

// TestPurgeSecrets checks purge deletes exactly the Secrets the purged
// instance's grant binds and no other grant binds, and says why it keeps
// the rest (D-58).
func TestPurgeSecrets(t *testing.T) {
	cases := map[string]struct {
		target Grant
		others []Grant
		want   SecretPurge
	}{
		"no grant deletes nothing": {
			target: Grant{Name: "fx"},
			want:   SecretPurge{},
		},
		"an unbound slot deletes the Secret named like it": {
			target: Grant{Name: "fx", Secrets: []SecretGrant{{Name: "fx-token"}}},
			want:   SecretPurge{Delete: []string{"fx-token"}},
		},
		"a bound slot deletes its bound Secret, not the one named like the slot": {
			target: Grant{Name: "fx", Secrets: []SecretGrant{{Name: "fx-token", SecretName: "fx-account-2"}}},
			want:   SecretPurge{Delete: []string{"fx-account-2"}},
		},
		"sorted and once, though two slots bind one Secret": {
			target: Grant{Name: "fx", Secrets: []SecretGrant{{Name: "z"}, {Name: "b", SecretName: "shared"}, {Name: "c", SecretName: "shared"}, {Name: "a"}}},
			want:   SecretPurge{Delete: []string{"a", "shared", "z"}},
		},
		"a Secret another grant binds is kept, with who binds it": {
			target: Grant{Name: "un-b", Secrets: []SecretGrant{{Name: "fx-token", SecretName: "un-shared"}, {Name: "own"}}},
			others: []Grant{
				{Name: "un-d", Secrets: []SecretGrant{{Name: "other-slot", SecretName: "un-shared"}}},
				{Name: "un-c", Secrets: []SecretGrant{{Name: "fx-token", SecretName: "un-shared"}, {Name: "again", SecretName: "un-shared"}}},
				{Name: "un-e", Secrets: []SecretGrant{{Name: "fx-token"}}},
			},
			want: SecretPurge{Delete: []string{"own"}, Keep: []KeptSecret{{Secret: "un-shared", BoundBy: []string{"un-c", "un-d"}}}},
		},
		"an unbound slot of another grant keeps the Secret named like it": {
			target: Grant{Name: "a", Secrets: []SecretGrant{{Name: "x", SecretName: "creds"}}},
			others: []Grant{{Name: "b", Secrets: []SecretGrant{{Name: "creds"}}}},
			want:   SecretPurge{Keep: []KeptSecret{{Secret: "creds", BoundBy: []string{"b"}}}},
		},
		"the target listed among the others is itself, not a user": {
			target: Grant{Name: "fx", Secrets: []SecretGrant{{Name: "fx-token"}}},
			others: []Grant{{Name: "fx", Secrets: []SecretGrant{{Name: "fx-token"}}}},
			want:   SecretPurge{Delete: []string{"fx-token"}},
		},
		"a name that is no Secret name is left out": {
			target: Grant{Name: "fx", Secrets: []SecretGrant{{Name: "ok"}, {Name: "x", SecretName: "../etc"}, {Name: ""}}},
			want:   SecretPurge{Delete: []string{"ok"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sameOrDiff(t, "purge", tc.want, PurgeSecrets(tc.target, tc.others))
		})
	}
}

// TestPurgeSecretsNeverAManifestSlot is the domain side of a
// regression test: a vendor's manifest asks for a slot named like another
// component's Secret, the owner grants only the plugin's own slot, and purge
// deletes only that. PurgeSecrets takes no manifest at all, so a slot the
// grant does not bind cannot reach it; this pins the grant side: whatever is
// requested, the Secrets deleted are a subset of the grant's bindings.
func TestPurgeSecretsNeverAManifestSlot(t *testing.T) {
	m := Manifest{
		Capabilities: []Capability{CapabilityConnector},
		Secrets:      []SecretMount{{Name: "fx-token", MountPath: "/etc/fx"}, {Name: "openfief-core-db", MountPath: "/etc/db"}},
	}
	a, err := Approve("greedy", m, nil, Selection{Capabilities: []Capability{CapabilityConnector}, Secrets: []string{"fx-token=greedy-token"}})
	if err != nil {
		t.Fatal(err)
	}
	sameOrDiff(t, "still pending", []string{"openfief-core-db"}, a.Remaining().Secrets)
	got := PurgeSecrets(a.Grant, nil)
	sameOrDiff(t, "purge", SecretPurge{Delete: []string{"greedy-token"}}, got)
}
