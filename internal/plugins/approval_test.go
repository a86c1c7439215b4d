package plugins

import (
	"errors"
	"testing"
)

// approvalManifest asks for a capability, two hosts, two Secret slots and a
// data tier.
func approvalManifest() Manifest {
	return Manifest{
		Capabilities: []Capability{CapabilityConnector},
		Egress:       []string{"api.nbp.pl", "static.nbp.pl:8443"},
		Secrets:      []SecretMount{{Name: "creds", MountPath: "/etc/creds"}, {Name: "extra", MountPath: "/etc/extra"}},
		DataTiers:    []string{"rates"},
	}
}

// approvalGranted holds all of approvalManifest but one host and one slot.
func approvalGranted() *Grant {
	return &Grant{Name: "fx", Capabilities: []Capability{CapabilityConnector}, Egress: []string{"api.nbp.pl"},
		Secrets: []SecretGrant{{Name: "creds"}}, DataTiers: []string{"rates"}}
}

// TestApprove checks what an approval adds to a grant: everything pending
// by default, only the named parts otherwise, Secret bindings and rebinding
// (OF-1), and every refusal with its field and sentinel (D-16).
func TestApprove(t *testing.T) {
	cases := map[string]struct {
		// plugin is the instance approved; "fx" when empty.
		plugin  string
		current *Grant
		sel     Selection
		want    Grant
		// approved, secrets and rebound are checked when set.
		approved *Pending
		secrets  []SecretBinding
		rebound  []SecretBinding
		pulls    []string
		// field and err are the refusal expected, if any.
		field string
		err   error
	}{
		"no grant: everything pending is approved": {
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl:443", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}},
			secrets: []SecretBinding{{Slot: "creds", SecretName: "creds", MountPath: "/etc/creds"}, {Slot: "extra", SecretName: "extra", MountPath: "/etc/extra"}},
		},
		"upgrade: only the difference is added": {
			current: approvalGranted(),
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}},
			approved: &Pending{Egress: []string{"static.nbp.pl:8443"}, Secrets: []string{"extra"}},
		},
		"pull Secrets only: nothing pending is approved": {
			sel:      Selection{PullSecrets: []string{"regcred", "ghcr-pull"}},
			want:     Grant{Name: "fx", ImagePullSecrets: []string{"ghcr-pull", "regcred"}},
			approved: &Pending{},
			pulls:    []string{"ghcr-pull", "regcred"},
		},
		"a pull Secret when nothing else is pending": {
			current: &Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}, ImagePullSecrets: []string{"old"}},
			sel: Selection{PullSecrets: []string{"regcred"}},
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}, ImagePullSecrets: []string{"old", "regcred"}},
			pulls: []string{"regcred"},
		},
		"all keeps the grant's pull Secrets and adds the named": {
			current: &Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl"},
				Secrets: []SecretGrant{{Name: "creds"}}, DataTiers: []string{"rates"}, ImagePullSecrets: []string{"zz"}},
			sel: Selection{All: true, PullSecrets: []string{"aa"}},
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}, ImagePullSecrets: []string{"aa", "zz"}},
			pulls: []string{"aa"},
		},
		"a pull Secret that is no Secret name": {
			sel:   Selection{PullSecrets: []string{"ok", "Reg_Cred"}},
			field: "selection.pullSecrets[1]", err: ErrInvalidSecretName,
		},
		"a pull Secret named twice": {
			sel:   Selection{PullSecrets: []string{"regcred", "regcred"}},
			field: "selection.pullSecrets[1]", err: ErrDuplicate,
		},
		"a pull Secret the grant holds": {
			current: &Grant{Name: "fx", ImagePullSecrets: []string{"regcred"}},
			sel:     Selection{PullSecrets: []string{"regcred"}},
			field:   "selection.pullSecrets[0]", err: ErrAlreadyGranted,
		},
		"more pull Secrets than a grant holds": {
			current: &Grant{Name: "fx", ImagePullSecrets: pullSecretNames(MaxImagePullSecrets)},
			sel:     Selection{PullSecrets: []string{"one-more"}},
			field:   "grant.imagePullSecrets", err: ErrInvalidSecretName,
		},
		"only the named host, in canonical form": {
			sel:      Selection{Egress: []string{"STATIC.nbp.pl:8443", "static.nbp.pl:8443"}},
			want:     Grant{Name: "fx", Egress: []string{"static.nbp.pl:8443"}},
			approved: &Pending{Egress: []string{"static.nbp.pl:8443"}},
		},
		"only the named capability and data tier": {
			sel:  Selection{Capabilities: []Capability{"connector", "connector"}, DataTiers: []string{"rates"}},
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, DataTiers: []string{"rates"}},
		},
		"a slot bound to a Secret of the owner's choosing": {
			sel:     Selection{Secrets: []string{"creds=account-2"}},
			want:    Grant{Name: "fx", Secrets: []SecretGrant{{Name: "creds", SecretName: "account-2"}}},
			secrets: []SecretBinding{{Slot: "creds", SecretName: "account-2", MountPath: "/etc/creds"}},
		},
		"a slot bound to its own name is recorded unbound": {
			sel:  Selection{Secrets: []string{"creds=creds"}},
			want: Grant{Name: "fx", Secrets: []SecretGrant{{Name: "creds"}}},
		},
		"all with a binding": {
			current: approvalGranted(),
			sel:     Selection{All: true, Secrets: []string{"extra=extra-2"}},
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds"}, {Name: "extra", SecretName: "extra-2"}}, DataTiers: []string{"rates"}},
			secrets: []SecretBinding{{Slot: "extra", SecretName: "extra-2", MountPath: "/etc/extra"}},
		},
		"all, approving and rebinding": {
			current: approvalGranted(),
			sel:     Selection{All: true, Secrets: []string{"creds=account-2"}},
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds", SecretName: "account-2"}, {Name: "extra"}}, DataTiers: []string{"rates"}},
			rebound: []SecretBinding{{Slot: "creds", SecretName: "account-2", MountPath: "/etc/creds"}},
		},
		"rebinding a granted slot": {
			current: approvalGranted(),
			sel:     Selection{Secrets: []string{"creds=account-2"}},
			want: Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl"},
				Secrets: []SecretGrant{{Name: "creds", SecretName: "account-2"}}, DataTiers: []string{"rates"}},
			approved: &Pending{},
			rebound:  []SecretBinding{{Slot: "creds", SecretName: "account-2", MountPath: "/etc/creds"}},
		},
		"rebinding a slot back to its own name": {
			current: &Grant{Name: "fx", Secrets: []SecretGrant{{Name: "creds", SecretName: "account-2"}}},
			sel:     Selection{Secrets: []string{"creds"}},
			want:    Grant{Name: "fx", Secrets: []SecretGrant{{Name: "creds"}}},
			rebound: []SecretBinding{{Slot: "creds", SecretName: "creds", MountPath: "/etc/creds"}},
		},
		"the grant's name is the plugin's": {
			current: &Grant{Name: "other", Capabilities: []Capability{"connector"}},
			sel:     Selection{DataTiers: []string{"rates"}},
			want:    Grant{Name: "fx", Capabilities: []Capability{"connector"}, DataTiers: []string{"rates"}},
		},
		"nothing pending": {
			current: &Grant{Name: "fx", Capabilities: []Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}},
			field: "selection", err: ErrNothingPending,
		},
		"all and a host": {
			sel:   Selection{All: true, Egress: []string{"api.nbp.pl"}},
			field: "selection.all", err: ErrSelectionConflict,
		},
		"a host not requested": {
			sel:   Selection{Egress: []string{"api.nbp.pl", "evil.example.com"}},
			field: "selection.egress[1]", err: ErrNotRequested,
		},
		"a host already granted": {
			current: approvalGranted(), sel: Selection{Egress: []string{"api.nbp.pl:443"}},
			field: "selection.egress[0]", err: ErrAlreadyGranted,
		},
		"an invalid host": {
			sel:   Selection{Egress: []string{"*.nbp.pl"}},
			field: "selection.egress[0]", err: ErrInvalidEgressHost,
		},
		"a capability not requested": {
			sel:   Selection{Capabilities: []Capability{"view"}},
			field: "selection.capabilities[0]", err: ErrNotRequested,
		},
		"a capability already granted": {
			current: approvalGranted(), sel: Selection{Capabilities: []Capability{"connector"}},
			field: "selection.capabilities[0]", err: ErrAlreadyGranted,
		},
		"a data tier not requested": {
			sel:   Selection{DataTiers: []string{"raw"}},
			field: "selection.dataTiers[0]", err: ErrNotRequested,
		},
		"a data tier already granted": {
			current: approvalGranted(), sel: Selection{DataTiers: []string{"rates"}},
			field: "selection.dataTiers[0]", err: ErrAlreadyGranted,
		},
		"an unknown slot": {
			sel:   Selection{Secrets: []string{"creds", "other=x"}},
			field: "selection.secrets[1]", err: ErrUnknownSecret,
		},
		"an empty Secret name": {
			sel:   Selection{Secrets: []string{"creds="}},
			field: "selection.secrets[0]", err: ErrRequired,
		},
		"an invalid Secret name": {
			sel:   Selection{Secrets: []string{"creds=Not_A_Name"}},
			field: "selection.secrets[0]", err: ErrInvalidSecretName,
		},
		"a slot named twice": {
			sel:   Selection{Secrets: []string{"creds", "creds=x"}},
			field: "selection.secrets[1]", err: ErrDuplicate,
		},
		"a granted slot bound the same": {
			current: approvalGranted(), sel: Selection{Secrets: []string{"creds"}},
			field: "selection.secrets[0]", err: ErrAlreadyGranted,
		},
		"an invalid plugin name": {
			plugin: "Not A Name", sel: Selection{Capabilities: []Capability{"connector"}},
			field: "grant.name", err: ErrInvalidName,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plugin := tc.plugin
			if plugin == "" {
				plugin = "fx"
			}
			a, err := Approve(plugin, approvalManifest(), tc.current, tc.sel)
			if tc.err != nil {
				var fe *FieldError
				if !errors.Is(err, tc.err) || !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("error %v, want a *FieldError for %s wrapping %v", err, tc.field, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Approve: %v", err)
			}
			sameOrDiff(t, "grant", tc.want, a.Grant)
			if tc.approved != nil {
				sameOrDiff(t, "approved", *tc.approved, a.Approved)
			}
			if tc.secrets != nil {
				sameOrDiff(t, "secrets", tc.secrets, a.Secrets)
			}
			if tc.rebound != nil {
				sameOrDiff(t, "rebound", tc.rebound, a.Rebound)
			}
			if tc.pulls != nil {
				sameOrDiff(t, "pull secrets", tc.pulls, a.PullSecrets)
			}
			if !tc.sel.named() && !a.Remaining().IsEmpty() {
				t.Errorf("approving everything left %v pending", a.Remaining())
			}
			// The plan is exactly what the resulting grant holds: nothing it
			// approved is pending afterwards, and what remains is what was
			// not approved.
			after := NeedsApproval(approvalManifest(), &a.Grant)
			sameOrDiff(t, "pending after", a.Remaining(), after)
		})
	}
}

// TestApproveLeavesCurrentAlone checks the plan never writes into the grant
// it was given: the caller may still show or compare it.
func TestApproveLeavesCurrentAlone(t *testing.T) {
	current := approvalGranted()
	before := *approvalGranted()
	if _, err := Approve("fx", approvalManifest(), current, Selection{All: true, Secrets: []string{"creds=account-2"}}); err != nil {
		t.Fatal(err)
	}
	sameOrDiff(t, "current", before, *current)
}

// TestApproveEmptyManifestSlots checks an unknown slot's message says the
// manifest has none.
func TestApproveEmptyManifestSlots(t *testing.T) {
	m := approvalManifest()
	m.Secrets = nil
	_, err := Approve("fx", m, nil, Selection{Secrets: []string{"creds"}})
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnknownSecret) || fe.Detail != `the manifest has no Secret slot "creds" (slots: none)` {
		t.Fatalf("error %v, want ErrUnknownSecret saying there are no slots", err)
	}
}

// TestApprovalRemaining checks what stays pending is the difference, kind
// by kind, and nil where nothing is left.
func TestApprovalRemaining(t *testing.T) {
	a := Approval{
		Pending:  Pending{Capabilities: []Capability{"connector", "view"}, Egress: []string{"a:443", "b:443"}, Secrets: []string{"s"}, DataTiers: []string{"t"}},
		Approved: Pending{Capabilities: []Capability{"view"}, Egress: []string{"b:443"}, Secrets: []string{"s"}},
	}
	want := Pending{Capabilities: []Capability{"connector"}, Egress: []string{"a:443"}, DataTiers: []string{"t"}}
	sameOrDiff(t, "remaining", want, a.Remaining())
}
