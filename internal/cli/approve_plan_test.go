package cli

import (
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestApprovalError checks how approve reports the domain's refusals
// (plugins.Approve decides them; its own table is in internal/plugins):
// the exit code, and a message naming the flag and the value as typed.
func TestApprovalError(t *testing.T) {
	m := plugins.Manifest{
		Capabilities: []plugins.Capability{plugins.CapabilityConnector},
		Egress:       []string{"api.nbp.pl"},
		Secrets:      []plugins.SecretMount{{Name: "creds", MountPath: "/etc/creds"}},
		DataTiers:    []string{"rates"},
	}
	granted := &plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector"}, Egress: []string{"api.nbp.pl"},
		Secrets: []plugins.SecretGrant{{Name: "creds"}}, DataTiers: []string{"rates"}}
	cases := map[string]struct {
		current *plugins.Grant
		sel     plugins.Selection
		code    int
		msg     string
		// slots are the manifest's owner egress slots.
		slots int
	}{
		"nothing pending": {
			current: granted, code: ExitNothingToDo,
			msg: `nothing pending for plugin "fx": its grant holds everything spec.manifest asks for`,
		},
		"a host not requested": {
			sel: plugins.Selection{Egress: []string{"api.nbp.pl", "evil.example.com"}}, code: ExitInvalid,
			msg: "--host evil.example.com: not requested by the plugin's manifest: a grant beyond the request adds nothing",
		},
		"a host already granted, as typed": {
			current: granted, sel: plugins.Selection{Egress: []string{"API.nbp.pl"}}, code: ExitInvalid,
			msg: "--host API.nbp.pl: already granted, not pending",
		},
		"an invalid host": {
			sel: plugins.Selection{Egress: []string{"*.nbp.pl"}}, code: ExitInvalid,
			msg: `--host *.nbp.pl: invalid egress host: "*.nbp.pl": `,
		},
		"a capability": {
			sel: plugins.Selection{Capabilities: []plugins.Capability{"view"}}, code: ExitInvalid,
			msg: "--capability view: not requested by the plugin's manifest",
		},
		"a data tier": {
			current: granted, sel: plugins.Selection{DataTiers: []string{"rates"}}, code: ExitInvalid,
			msg: "--data-tier rates: already granted, not pending",
		},
		"an unknown slot": {
			sel: plugins.Selection{Secrets: []string{"other=x"}}, code: ExitInvalid,
			msg: `--secret other=x: unknown secret slot: the manifest has no Secret slot "other" (slots: creds)`,
		},
		"an empty Secret name": {
			sel: plugins.Selection{Secrets: []string{"creds="}}, code: ExitInvalid,
			msg: "--secret creds=: required: empty Secret name; write SLOT or SLOT=SECRET",
		},
		"a granted slot bound the same": {
			current: granted, sel: plugins.Selection{Secrets: []string{"creds"}}, code: ExitInvalid,
			msg: `--secret creds: already granted, not pending: slot "creds" mounts Secret "creds" already`,
		},
		"all and a host": {
			sel: plugins.Selection{All: true, Egress: []string{"api.nbp.pl"}}, code: ExitInvalid,
			msg: "--all: conflicting selection",
		},
		"a host of the owner's choosing without a free slot": {
			current: &plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector"}, OwnerEgress: []string{"cloud.example.com"}},
			sel:     plugins.Selection{Egress: []string{"NAS.example.org"}}, code: ExitInvalid, slots: 1,
			msg: "--host NAS.example.org: no free slot for a host of your choosing: the manifest does not request nas.example.org:443 and allows 1 host(s) of your choosing, taken by cloud.example.com:443",
		},
		"an invalid grant": {
			current: &plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{"connector", "connector"}},
			sel:     plugins.Selection{DataTiers: []string{"rates"}}, code: ExitInvalid,
			msg: "the grant would be invalid: grant.capabilities[1]: duplicate entry",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := m
			m.OwnerEgress = tc.slots
			_, err := plugins.Approve("fx", m, tc.current, tc.sel)
			err = approvalError("fx", selectorFlags(tc.sel), err)
			if got := ExitCode(err); got != tc.code {
				t.Fatalf("exit code %d (%v), want %d", got, err, tc.code)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.msg) {
				t.Errorf("message %q, want it to start %q", got, tc.msg)
			}
		})
	}
}
