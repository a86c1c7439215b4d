package plugins

import (
	"encoding/json"
	"testing"
)

func TestManifestEqual(t *testing.T) {
	base := func() Manifest {
		return Manifest{
			Capabilities: []Capability{CapabilityConnector, CapabilityView},
			Egress:       []string{"api.example.com", "files.example.com:8443"},
			Secrets:      []SecretMount{{Name: "a", MountPath: "/etc/a"}, {Name: "b", MountPath: "/etc/b"}},
			DataTiers:    []string{"balances", "transactions"},
			ConfigSchema: json.RawMessage(`{"type":"object","properties":{"days":{"type":"integer","maximum":100}}}`),
		}
	}
	with := func(f func(*Manifest)) Manifest {
		m := base()
		f(&m)
		return m
	}
	schema := func(s string) Manifest { return with(func(m *Manifest) { m.ConfigSchema = json.RawMessage(s) }) }

	tests := map[string]struct {
		a, b Manifest
		want bool
	}{
		"identical":                 {base(), base(), true},
		"zero manifests":            {Manifest{}, Manifest{}, true},
		"capabilities reordered":    {base(), with(func(m *Manifest) { m.Capabilities = []Capability{CapabilityView, CapabilityConnector} }), true},
		"a capability fewer":        {base(), with(func(m *Manifest) { m.Capabilities = []Capability{CapabilityConnector} }), false},
		"a capability repeated":     {base(), with(func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapabilityView) }), true},
		"hosts reordered":           {base(), with(func(m *Manifest) { m.Egress = []string{"files.example.com:8443", "api.example.com"} }), true},
		"host with its port 443":    {base(), with(func(m *Manifest) { m.Egress[0] = "api.example.com:443" }), true},
		"host in upper case":        {base(), with(func(m *Manifest) { m.Egress[0] = "API.Example.COM" }), true},
		"host in Unicode and xn--":  {with(func(m *Manifest) { m.Egress = []string{"bücher.example"} }), with(func(m *Manifest) { m.Egress = []string{"xn--bcher-kva.example:443"} }), true},
		"host on another port":      {base(), with(func(m *Manifest) { m.Egress[1] = "files.example.com" }), false},
		"another host":              {base(), with(func(m *Manifest) { m.Egress[0] = "api.example.org" }), false},
		"a host more":               {base(), with(func(m *Manifest) { m.Egress = append(m.Egress, "evil.example") }), false},
		"no hosts and nil hosts":    {with(func(m *Manifest) { m.Egress = []string{} }), with(func(m *Manifest) { m.Egress = nil }), true},
		"invalid host never equal":  {with(func(m *Manifest) { m.Egress = []string{"*.example.com"} }), with(func(m *Manifest) { m.Egress = []string{"*.example.com"} }), false},
		"Secrets reordered":         {base(), with(func(m *Manifest) { m.Secrets[0], m.Secrets[1] = m.Secrets[1], m.Secrets[0] }), true},
		"Secret mounted elsewhere":  {base(), with(func(m *Manifest) { m.Secrets[0].MountPath = "/etc/other" }), false},
		"Secret paths swapped":      {base(), with(func(m *Manifest) { m.Secrets[0].MountPath, m.Secrets[1].MountPath = "/etc/b", "/etc/a" }), false},
		"a Secret fewer":            {base(), with(func(m *Manifest) { m.Secrets = m.Secrets[:1] }), false},
		"tiers reordered":           {base(), with(func(m *Manifest) { m.DataTiers = []string{"transactions", "balances"} }), true},
		"tier in another case":      {base(), with(func(m *Manifest) { m.DataTiers[0] = "Balances" }), false},
		"schema white space":        {base(), schema(`{ "properties" : { "days" : { "maximum" : 100, "type" : "integer" } }, "type" : "object" }`), true},
		"schema 100 and 1e2":        {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":1e2}}}`), true},
		"schema 100 and 100.0":      {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":100.0}}}`), true},
		"schema 100 and 1000e-1":    {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":1000e-1}}}`), true},
		"schema 100 and 1E+2":       {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":1E+2}}}`), true},
		"schema 100 and 101":        {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":101}}}`), false},
		"schema 100 and -100":       {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":-100}}}`), false},
		"schema 100 and \"100\"":    {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":"100"}}}`), false},
		"schema 100 and 10":         {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":10}}}`), false},
		"schema 100 and 1e3":        {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":1e3}}}`), false},
		"schema key missing":        {base(), schema(`{"type":"object","properties":{"days":{"type":"integer"}}}`), false},
		"schema key extra":          {base(), schema(`{"type":"object","properties":{"days":{"type":"integer","maximum":100,"minimum":0}}}`), false},
		"schema null value vs none": {schema(`{"a":null}`), schema(`{}`), false},
		"schema arrays keep order":  {schema(`{"required":["a","b"]}`), schema(`{"required":["b","a"]}`), false},
		"schema arrays equal":       {schema(`{"required":["a","b"]}`), schema(`{"required":["a","b"]}`), true},
		"schema nested arrays":      {schema(`{"enum":[[1,2],[3]]}`), schema(`{"enum":[[1,2.0],[3e0]]}`), true},
		"schema array lengths":      {schema(`{"enum":[1,2]}`), schema(`{"enum":[1,2,3]}`), false},
		"schema bool and object":    {schema(`true`), schema(`{}`), false},
		"schema true and true":      {schema(`true`), schema(`true`), true},
		"schema true and false":     {schema(`true`), schema(`false`), false},
		"no schema and empty":       {schema(``), schema(`  `), true},
		"no schema and nil":         {schema(``), with(func(m *Manifest) { m.ConfigSchema = nil }), true},
		"no schema and {}":          {schema(``), schema(`{}`), false},
		"no schema and null":        {schema(``), schema(`null`), false},
		"{} and no schema":          {schema(`{}`), schema(``), false},
		"invalid schema":            {schema(`{`), schema(`{`), false},
		"schema with trailing data": {schema(`{} {}`), schema(`{} {}`), false},
		"schema invalid UTF-8":      {schema("{\"a\":\"\xff\"}"), schema("{\"a\":\"\xfe\"}"), false},
		"float64 would round":       {schema(`{"m":0.1}`), schema(`{"m":0.10000000000000001}`), false},
		"huge integers differ":      {schema(`{"m":9007199254740993}`), schema(`{"m":9007199254740992}`), false},
		"huge exponents":            {schema(`{"m":1e999999999}`), schema(`{"m":10e999999998}`), true},
		"huge exponents differ":     {schema(`{"m":1e999999999}`), schema(`{"m":1e999999998}`), false},
		"zero and minus zero":       {schema(`{"m":0}`), schema(`{"m":-0.0e5}`), true},
		"small fractions":           {schema(`{"m":0.0012}`), schema(`{"m":12e-4}`), true},
		"strings compare exactly":   {schema(`{"m":"é"}`), schema(`{"m":"\u00e9"}`), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.Equal(tc.b); got != tc.want {
				t.Errorf("a.Equal(b) = %v, want %v", got, tc.want)
			}
			if got := tc.b.Equal(tc.a); got != tc.want {
				t.Errorf("b.Equal(a) = %v, want %v (not symmetric)", got, tc.want)
			}
			// ManifestDigest agrees with Equal, except where Equal fails
			// closed on a value it cannot read: such a manifest is not
			// equal even to itself, yet has one digest.
			da, db := ManifestDigest(tc.a), ManifestDigest(tc.b)
			if failsClosed := unreadableManifestCases[name]; (da == db) != tc.want && !failsClosed {
				t.Errorf("ManifestDigest: %s and %s, want them equal: %v", da, db, tc.want)
			}
		})
	}
}

// unreadableManifestCases are TestManifestEqual's cases where Equal fails
// closed on both sides.
var unreadableManifestCases = map[string]bool{
	"invalid host never equal":  true,
	"invalid schema":            true,
	"schema with trailing data": true,
	"schema invalid UTF-8":      true,
}

func TestManifestDigestForm(t *testing.T) {
	d := ManifestDigest(Manifest{Capabilities: []Capability{CapabilityConnector}})
	if len(d) != len("sha256:")+64 || d[:7] != "sha256:" {
		t.Errorf("ManifestDigest = %q, want sha256:<64 hex>", d)
	}
	if d2 := ManifestDigest(Manifest{Capabilities: []Capability{CapabilityConnector}, OwnerEgress: 1}); d2 == d {
		t.Error("an owner egress slot more gives the same digest")
	}
	if d3 := ManifestDigest(Manifest{Capabilities: []Capability{CapabilityConnector}, Resources: Resources{Memory: "1Gi"}}); d3 != ManifestDigest(Manifest{Capabilities: []Capability{CapabilityConnector}, Resources: Resources{Memory: "1024Mi"}}) {
		t.Error("1Gi and 1024Mi give different digests")
	}
}

// FuzzManifestDigest checks that manifests Equal calls equal have the same
// digest, for a schema and hosts from the fuzzer, and that the digest never
// panics.
func FuzzManifestDigest(f *testing.F) {
	f.Add(`{"type":"object"}`, ` { "type" : "object" } `, "api.example.com", "API.example.com:443")
	f.Add(`{"m":1e2}`, `{"m":100.0}`, "a.example", "b.example")
	f.Add(`{`, `{`, "*.x", "*.x")
	f.Fuzz(func(t *testing.T, schemaA, schemaB, hostA, hostB string) {
		a := Manifest{Capabilities: []Capability{CapabilityConnector}, Egress: []string{hostA}, ConfigSchema: json.RawMessage(schemaA)}
		b := Manifest{Capabilities: []Capability{CapabilityConnector}, Egress: []string{hostB}, ConfigSchema: json.RawMessage(schemaB)}
		if a.Equal(b) && ManifestDigest(a) != ManifestDigest(b) {
			t.Errorf("equal manifests, different digests: %q %q, %q %q", schemaA, hostA, schemaB, hostB)
		}
	})
}

func TestEqualConfig(t *testing.T) {
	tests := map[string]struct {
		a, b string
		want bool
	}{
		"same":                       {`{"currency":"PLN"}`, `{"currency":"PLN"}`, true},
		"key order and white space":  {`{"a":1,"b":[1,2]}`, ` { "b": [1, 2], "a": 1 }`, true},
		"numbers by exact value":     {`{"days":100}`, `{"days":1e2}`, true},
		"missing equals empty":       {``, ` `, true},
		"missing equals {}":          {``, `{}`, true},
		"different value":            {`{"currency":"PLN"}`, `{"currency":"EUR"}`, false},
		"array order":                {`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		"close numbers":              {`{"x":0.1}`, `{"x":0.10000000000000001}`, false},
		"missing is not null":        {``, `null`, false},
		"invalid equals nothing":     {`{"a":`, `{"a":`, false},
		"trailing data is invalid":   {`{} {}`, `{} {}`, false},
		"missing is not a non-empty": {``, `{"a":1}`, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := EqualConfig(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
				t.Errorf("EqualConfig(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := EqualConfig(json.RawMessage(tc.b), json.RawMessage(tc.a)); got != tc.want {
				t.Errorf("not symmetric: EqualConfig(%q, %q) = %v", tc.b, tc.a, got)
			}
		})
	}
}

func TestCanonicalDecimal(t *testing.T) {
	tests := map[string]struct {
		in, want string
		ok       bool
	}{
		"zero":              {"0", "0", true},
		"minus zero":        {"-0", "0", true},
		"integer":           {"100", "1e2", true},
		"fraction":          {"1.50", "15e-1", true},
		"exponent":          {"1.5E+3", "15e2", true},
		"negative exponent": {"-25e-1", "-25e-1", true},
		"leading zeros":     {"0.001", "1e-3", true},
		"no digits":         {"-", "", false},
		"dot without frac":  {"1.", "", false},
		"letters":           {"0x10", "", false},
		"bad exponent":      {"1e+-2", "", false},
		"empty exponent":    {"1e", "", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := canonicalDecimal(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("canonicalDecimal(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
