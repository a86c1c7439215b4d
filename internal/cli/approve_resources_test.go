package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestApprovalPromptResources: the approval prompt shows the resources a
// plugin asks for beyond its grant with the defaults beside them, what the
// approval adds, and what stays pending when --resources is not named; and
// --resources on a plugin that asks for none is refused naming the flag.
func TestApprovalPromptResources(t *testing.T) {
	m := plugins.Manifest{
		Capabilities: []plugins.Capability{plugins.CapabilityConnector},
		Egress:       []string{"api.nbp.pl"},
		Resources:    plugins.Resources{Memory: "512Mi", CPU: "1"},
	}
	const defaults = "(the defaults are memory 128Mi, cpu 500m, tmp 64Mi)"
	image := "r.example/fx@sha256:" + strings.Repeat("ab", 32)

	a, err := plugins.Approve("fx", m, nil, plugins.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printApprovalPrompt(&b, "fx", image, a, m)
	pending, approves, _ := strings.Cut(b.String(), "This approves:")
	want := "Resources:     memory 512Mi, cpu 1 " + defaults
	if !strings.Contains(pending, want) || !strings.Contains(approves, want) {
		t.Errorf("the prompt does not show %q as pending and approved:\n%s", want, b.String())
	}

	a, err = plugins.Approve("fx", m, nil, plugins.Selection{Egress: []string{"api.nbp.pl"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	printApprovalPrompt(&b, "fx", image, a, m)
	_, after, ok := strings.Cut(b.String(), "Still pending afterwards:")
	if !ok || !strings.Contains(after, want) {
		t.Errorf("naming a host leaves the resources pending, the prompt says otherwise:\n%s", b.String())
	}

	m.Resources = plugins.Resources{}
	_, err = plugins.Approve("fx", m, nil, plugins.Selection{Resources: true})
	err = approvalError("fx", selectorFlags(plugins.Selection{Resources: true}), err)
	if ExitCode(err) != ExitInvalid || !strings.HasPrefix(err.Error(), "--resources: not requested by the plugin's manifest") {
		t.Errorf("--resources without a request: %v (exit %d)", err, ExitCode(err))
	}

	b.Reset()
	printManifest(&b, "  ", plugins.Manifest{Capabilities: []plugins.Capability{"view"}, Resources: plugins.Resources{Tmp: "256Mi\x1b[2J"}})
	if !strings.Contains(b.String(), "Resources:     tmp 256Mi") || strings.ContainsRune(b.String(), '\x1b') {
		t.Errorf("the manifest's resources are not shown escaped:\n%q", b.String())
	}
}
