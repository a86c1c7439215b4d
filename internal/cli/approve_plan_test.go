package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestPlanApproval checks what an approval adds to a grant, without a
// cluster: everything pending by default, only the named parts otherwise,
// Secret bindings, and every refusal with its exit code.
func TestPlanApproval(t *testing.T) {
	m := plugins.Manifest{
		Capabilities: []plugins.Capability{plugins.CapabilityConnector},
		Egress:       []string{"api.nbp.pl", "static.nbp.pl:8443"},
		Secrets:      []plugins.SecretMount{{Name: "creds", MountPath: "/etc/creds"}, {Name: "extra", MountPath: "/etc/extra"}},
		DataTiers:    []string{"rates"},
	}
	granted := &plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"},
		Secrets: []plugins.SecretGrant{{Name: "creds"}}, DataTiers: []string{"rates"}}
	cases := map[string]struct {
		current *plugins.Grant
		sel     selection
		want    plugins.Grant
		code    int
	}{
		"no grant: everything pending is approved": {
			want: plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector"}, Egress: []string{"api.nbp.pl:443", "static.nbp.pl:8443"},
				Secrets: []plugins.SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}},
		},
		"upgrade: only the difference is added": {
			current: granted,
			want: plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []plugins.SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}},
		},
		"only the named host": {
			sel:  selection{hosts: []string{"STATIC.nbp.pl:8443"}},
			want: plugins.Grant{Name: "fx", Egress: []string{"static.nbp.pl:8443"}},
		},
		"a slot bound to a Secret of the owner's choosing": {
			sel:  selection{secrets: []string{"creds=account-2"}},
			want: plugins.Grant{Name: "fx", Secrets: []plugins.SecretGrant{{Name: "creds", SecretName: "account-2"}}},
		},
		"all with a binding": {
			current: granted,
			sel:     selection{all: true, secrets: []string{"extra=extra-2"}},
			want: plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []plugins.SecretGrant{{Name: "creds"}, {Name: "extra", SecretName: "extra-2"}}, DataTiers: []string{"rates"}},
		},
		"rebinding a granted slot": {
			current: granted,
			sel:     selection{secrets: []string{"creds=account-2"}},
			want: plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector"}, Egress: []string{"api.nbp.pl"},
				Secrets: []plugins.SecretGrant{{Name: "creds", SecretName: "account-2"}}, DataTiers: []string{"rates"}},
		},
		"nothing pending": {
			current: &plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector"}, Egress: []string{"api.nbp.pl", "static.nbp.pl:8443"},
				Secrets: []plugins.SecretGrant{{Name: "creds"}, {Name: "extra"}}, DataTiers: []string{"rates"}},
			code: ExitNothingToDo,
		},
		"a host not requested":          {sel: selection{hosts: []string{"evil.example.com"}}, code: ExitInvalid},
		"a host already granted":        {current: granted, sel: selection{hosts: []string{"api.nbp.pl"}}, code: ExitInvalid},
		"an invalid host":               {sel: selection{hosts: []string{"*.nbp.pl"}}, code: ExitInvalid},
		"a capability not requested":    {sel: selection{capabilities: []string{"view"}}, code: ExitInvalid},
		"a data tier not requested":     {sel: selection{tiers: []string{"raw"}}, code: ExitInvalid},
		"an unknown slot":               {sel: selection{secrets: []string{"other=x"}}, code: ExitInvalid},
		"an empty Secret name":          {sel: selection{secrets: []string{"creds="}}, code: ExitInvalid},
		"an invalid Secret name":        {sel: selection{secrets: []string{"creds=Not_A_Name"}}, code: ExitInvalid},
		"a slot named twice":            {sel: selection{secrets: []string{"creds", "creds=x"}}, code: ExitInvalid},
		"a granted slot bound the same": {current: granted, sel: selection{secrets: []string{"creds"}}, code: ExitInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := planApproval("fx", m, tc.current, tc.sel)
			if got := ExitCode(err); got != tc.code {
				t.Fatalf("exit code %d (%v), want %d", got, err, tc.code)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, a.grant); diff != "" {
				t.Errorf("grant (-want +got):\n%s", diff)
			}
			if left := remaining(a.pending, a.approved); !left.IsEmpty() && !tc.sel.named() {
				t.Errorf("approving everything left %v pending", left)
			}
		})
	}
}
