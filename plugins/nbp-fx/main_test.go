package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/connectors/nbpfx"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/plugins/internal/manifesttest"
)

// TestManifest checks that nbp-fx asks for exactly what it needs (D-16,
// D-42): the connector capability, NBP's API host and nothing else (no
// Secrets, no data tiers), with a config schema that matches nbpfx.Config.
func TestManifest(t *testing.T) {
	m, schema := manifesttest.Load(t)
	if !slices.Equal(m.Capabilities, []plugins.Capability{plugins.CapabilityConnector}) {
		t.Errorf("capabilities = %v, want [connector]", m.Capabilities)
	}
	if !slices.Equal(m.Egress, []string{"api.nbp.pl"}) {
		t.Errorf("egress = %v, want [api.nbp.pl]", m.Egress)
	}
	if len(m.Secrets) != 0 || len(m.DataTiers) != 0 {
		t.Errorf("secrets %v, data tiers %v: nbp-fx needs none", m.Secrets, m.DataTiers)
	}
	if u := strings.TrimPrefix(nbpfx.DefaultBaseURL, "https://"); !slices.Contains(m.Egress, u) {
		t.Errorf("the default base URL's host %s is not in egress", u)
	}
	manifesttest.SameFields(t, schema, nbpfx.Config{})
	s := manifesttest.Schema(t, schema)
	for _, cfg := range []string{
		`{}`,
		`{"currencies":["EUR","USD"]}`,
		`{"baseURL":"https://api.nbp.pl","currencies":[],"startDate":"2024-01-01"}`,
		`{"baseURL":"https://nbp.test:8443/"}`,
	} {
		if !manifesttest.Accepts(t, s, cfg) {
			t.Errorf("schema refuses %s", cfg)
		}
		var c nbpfx.Config
		dec := json.NewDecoder(strings.NewReader(cfg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Errorf("%s: %v", cfg, err)
		} else if err := c.Validate(); err != nil {
			t.Errorf("schema accepts %s, Validate refuses it: %v", cfg, err)
		}
	}
	for _, cfg := range []string{
		`{"baseURL":"http://api.nbp.pl"}`,
		`{"baseURL":"https://api.nbp.pl/api"}`,
		`{"baseURL":"https://user@api.nbp.pl"}`,
		`{"currencies":["PLN"]}`,
		`{"currencies":["eur"]}`,
		`{"currencies":["EUR","EUR"]}`,
		`{"startDate":"1.1.2024"}`,
		`{"watermark":"2026-01-01"}`,
		`[]`,
	} {
		if manifesttest.Accepts(t, s, cfg) {
			t.Errorf("schema accepts %s", cfg)
		}
	}
}
