package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/connectors/ibkrflex"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/plugins/internal/manifesttest"
)

// TestManifest checks that ibkr-flex asks for exactly what it needs (D-16,
// D-42): the connector capability, the Flex Web Service host, one Secret
// slot, ibkr-flex-credentials, mounted where the adapter reads the token and
// query ID, and the data tier accounts (OF-11); its config schema matches
// ibkrflex.Config.
func TestManifest(t *testing.T) {
	m, schema := manifesttest.Load(t)
	if !slices.Equal(m.Capabilities, []plugins.Capability{plugins.CapabilityConnector}) {
		t.Errorf("capabilities = %v, want [connector]", m.Capabilities)
	}
	if !slices.Equal(m.Egress, []string{"ndcdyn.interactivebrokers.com"}) {
		t.Errorf("egress = %v, want [ndcdyn.interactivebrokers.com]", m.Egress)
	}
	if u := strings.TrimPrefix(ibkrflex.DefaultBaseURL, "https://"); !slices.Contains(m.Egress, u) {
		t.Errorf("the default base URL's host %s is not in egress", u)
	}
	want := []plugins.SecretMount{{Name: "ibkr-flex-credentials", MountPath: ibkrflex.DefaultCredentialsDir}}
	if !slices.Equal(m.Secrets, want) {
		t.Errorf("secrets = %v, want %v", m.Secrets, want)
	}
	// It delivers transactions and balances, the household's account data,
	// which the core accepts only with the accounts tier (OF-11).
	if !slices.Equal(m.DataTiers, []string{"accounts"}) {
		t.Errorf("data tiers %v, want [accounts]", m.DataTiers)
	}
	manifesttest.SameFields(t, schema, ibkrflex.Config{})
	s := manifesttest.Schema(t, schema)
	for _, cfg := range []string{
		`{"accounts":{"U1234567":{"cash":{"USD":"ibkr-usd"}}}}`,
		`{"baseURL":"https://flex.test:8443","accounts":{"U1234567":{"cash":{"USD":"a","EUR":"b"},"securities":"c"}},` +
			`"categories":{"dividends":"d","withholdingTax":"e","interest":"f","fees":"g","commissions":"h","transfers":"i","fxConversion":"j"}}`,
	} {
		if !manifesttest.Accepts(t, s, cfg) {
			t.Errorf("schema refuses %s", cfg)
		}
		var c ibkrflex.Config
		dec := json.NewDecoder(strings.NewReader(cfg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Errorf("%s: %v", cfg, err)
		} else if err := c.Validate(); err != nil {
			t.Errorf("schema accepts %s, Validate refuses it: %v", cfg, err)
		}
	}
	for _, cfg := range []string{
		`{}`,
		`{"accounts":{}}`,
		`{"accounts":{"U1":{"cash":{}}}}`,
		`{"accounts":{"U1":{"cash":{"usd":"a"}}}}`,
		`{"accounts":{"U-1":{"cash":{"USD":"a"}}}}`,
		`{"accounts":{"U1":{"cash":{"USD":""}}}}`,
		`{"accounts":{"U1":{"cash":{"USD":"a"},"token":"x"}}}`,
		`{"accounts":{"U1":{"cash":{"USD":"a"}}},"categories":{"other":"x"}}`,
		`{"accounts":{"U1":{"cash":{"USD":"a"}}},"baseURL":"http://ndcdyn.interactivebrokers.com"}`,
		`{"accounts":{"U1":{"cash":{"USD":"a"}}},"token":"123"}`,
	} {
		if manifesttest.Accepts(t, s, cfg) {
			t.Errorf("schema accepts %s", cfg)
		}
	}
}
