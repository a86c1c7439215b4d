package main

import (
	"slices"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/plugins/internal/manifesttest"
)

// TestManifest checks that the probe asks for what OF-29 says and nothing
// more: the view capability (the core never calls a view), one public host
// so the proxy cells have a granted host, no Secrets, no data tiers, no
// config.
func TestManifest(t *testing.T) {
	m, schema := manifesttest.Load(t)
	if !slices.Equal(m.Capabilities, []plugins.Capability{plugins.CapabilityView}) {
		t.Errorf("capabilities = %v, want [view]", m.Capabilities)
	}
	if !slices.Equal(m.Egress, []string{"example.com"}) {
		t.Errorf("egress = %v, want [example.com]", m.Egress)
	}
	if len(m.Secrets) != 0 || len(m.DataTiers) != 0 || len(schema) != 0 {
		t.Errorf("secrets %v, data tiers %v, config schema %s: the probe needs none", m.Secrets, m.DataTiers, schema)
	}
}
