package plugins

import (
	"encoding/json"
	"testing"
)

func TestFirstDifference(t *testing.T) {
	base := Manifest{
		Capabilities: []Capability{CapabilityConnector},
		Egress:       []string{"api.example.com"},
		Secrets:      []SecretMount{{Name: "s", MountPath: "/etc/s"}},
		DataTiers:    []string{"accounts"},
		ConfigSchema: json.RawMessage(`{"type":"object"}`),
		Resources:    Resources{Memory: "256Mi"},
	}
	for want, change := range map[string]func(*Manifest){
		"":             func(m *Manifest) { m.Egress = []string{"API.example.com:443"}; m.Resources.Memory = "256Mi" },
		"capabilities": func(m *Manifest) { m.Capabilities = []Capability{CapabilityView} },
		"egress":       func(m *Manifest) { m.Egress = []string{"api.example.org"} },
		"ownerEgress":  func(m *Manifest) { m.OwnerEgress = 1 },
		"secrets":      func(m *Manifest) { m.Secrets[0].MountPath = "/etc/t" },
		"dataTiers":    func(m *Manifest) { m.DataTiers = nil },
		"configSchema": func(m *Manifest) { m.ConfigSchema = json.RawMessage(`{"type":"array"}`) },
		"resources":    func(m *Manifest) { m.Resources.Memory = "512Mi" },
	} {
		other := base
		other.Secrets = append([]SecretMount(nil), base.Secrets...)
		change(&other)
		if got := base.FirstDifference(other); got != want {
			t.Errorf("FirstDifference = %q, want %q", got, want)
		}
		if (want == "") != base.Equal(other) {
			t.Errorf("%q: FirstDifference and Equal disagree", want)
		}
	}
	// The first field in the manifest's order is named.
	other := base
	other.DataTiers, other.Capabilities = nil, []Capability{CapabilityView}
	if got := base.FirstDifference(other); got != "capabilities" {
		t.Errorf("two differences: FirstDifference = %q, want capabilities", got)
	}
}
