package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/plugins/internal/manifesttest"
)

// TestManifest checks that the probe asks for what OF-29 says and nothing
// more: the view capability (the core never calls the check's probes), one
// public host so the proxy cells have a granted host, no Secrets, no data
// tiers; its config schema takes only the at-start cells (OF-42).
func TestManifest(t *testing.T) {
	m, schema := manifesttest.Load(t)
	if !slices.Equal(m.Capabilities, []plugins.Capability{plugins.CapabilityView}) {
		t.Errorf("capabilities = %v, want [view]", m.Capabilities)
	}
	if !slices.Equal(m.Egress, []string{"example.com"}) {
		t.Errorf("egress = %v, want [example.com]", m.Egress)
	}
	if len(m.Secrets) != 0 || len(m.DataTiers) != 0 {
		t.Errorf("secrets %v, data tiers %v: the probe needs none", m.Secrets, m.DataTiers)
	}
	var s struct {
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Properties["atStart"]; !ok || len(s.Properties) != 1 || s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("config schema %s: want only atStart, nothing else allowed", schema)
	}
}
