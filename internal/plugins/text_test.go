package plugins

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// unsafeSamples are one of each kind of character the text rule refuses,
// and invalid UTF-8.
var unsafeSamples = map[string]string{
	"ESC":          "\x1b",
	"attack":       "\x1b7\x1b[1A\x1b[2K\x1b8",
	"tab":          "\t",
	"newline":      "\n",
	"CR":           "\r",
	"NUL":          "\x00",
	"DEL":          "\x7f",
	"C1 CSI":       "\u009b",
	"RLO":          "\u202e",
	"LRE":          "\u202a",
	"RLI":          "\u2067",
	"PDI":          "\u2069",
	"LRM":          "\u200e",
	"RLM":          "\u200f",
	"ALM":          "\u061c",
	"LS":           "\u2028",
	"invalid byte": "\xff",
	"truncated":    "\xc3",
}

func TestIsUnsafeRune(t *testing.T) {
	for r := rune(0); r <= 0x10ffff; r++ {
		want := r < 0x20 || r >= 0x7f && r <= 0x9f || r == 0x061c || r == 0x200e || r == 0x200f ||
			r >= 0x2028 && r <= 0x202e || r >= 0x2066 && r <= 0x2069
		if got := IsUnsafeRune(r); got != want {
			t.Fatalf("IsUnsafeRune(%U) = %v, want %v", r, got, want)
		}
	}
}

func TestCheckText(t *testing.T) {
	for name, s := range unsafeSamples {
		if err := CheckText("a"+s+"b", 0); err == nil {
			t.Errorf("%s: CheckText accepts %q", name, s)
		} else if strings.Contains(err.Error(), s) {
			t.Errorf("%s: the error %q echoes the text", name, err)
		}
	}
	for _, s := range []string{"", "/etc/openfief/ibkr", "zażółć ☃ 日本", "a\u200db", "\ufffd"} {
		if err := CheckText(s, 0); err != nil {
			t.Errorf("CheckText(%q) = %v", s, err)
		}
	}
	if err := CheckText("abcd", 3); err == nil {
		t.Error("CheckText ignores the bound")
	}
}

// TestTextRuleEveryField (OF-17): every string of a manifest, a plugin and
// a grant refuses each unsafe character with ErrUnsafeText at its own
// field path, and the value yields that one problem.
func TestTextRuleEveryField(t *testing.T) {
	type target struct {
		field string
		apply func(p *Plugin, g *Grant, s string)
	}
	targets := []target{
		{"name", func(p *Plugin, _ *Grant, s string) { p.Name = "fx" + s }},
		{"image", func(p *Plugin, _ *Grant, s string) { p.Image = "ghcr.io/a" + s + "@" + testDigest }},
		{"manifest.capabilities[0]", func(p *Plugin, _ *Grant, s string) { p.Manifest.Capabilities[0] = Capability("connector" + s) }},
		{"manifest.egress[0]", func(p *Plugin, _ *Grant, s string) { p.Manifest.Egress[0] = "api.nbp.pl" + s }},
		{"manifest.secrets[0].name", func(p *Plugin, _ *Grant, s string) { p.Manifest.Secrets[0].Name = "creds" + s }},
		{"manifest.secrets[0].mountPath", func(p *Plugin, _ *Grant, s string) { p.Manifest.Secrets[0].MountPath = "/etc/x" + s }},
		{"manifest.dataTiers[0]", func(p *Plugin, _ *Grant, s string) { p.Manifest.DataTiers[0] = "accounts" + s }},
		{`manifest.configSchema["title"]`, func(p *Plugin, _ *Grant, s string) {
			p.Manifest.ConfigSchema = schemaWith(map[string]any{"title": "t" + s})
		}},
		{`manifest.configSchema["properties"]["a"]["description"]`, func(p *Plugin, _ *Grant, s string) {
			p.Manifest.ConfigSchema = schemaWith(map[string]any{"properties": map[string]any{"a": map[string]any{"description": s}}})
		}},
		{`manifest.configSchema["enum"][1]`, func(p *Plugin, _ *Grant, s string) {
			p.Manifest.ConfigSchema = schemaWith(map[string]any{"enum": []any{"ok", s}})
		}},
		{`manifest.configSchema["properties"] (a key)`, func(p *Plugin, _ *Grant, s string) {
			p.Manifest.ConfigSchema = schemaWith(map[string]any{"properties": map[string]any{"k" + s: true}})
		}},
		{"grant.name", func(_ *Plugin, g *Grant, s string) { g.Name = "fx" + s }},
		{"grant.capabilities[0]", func(_ *Plugin, g *Grant, s string) { g.Capabilities[0] = Capability("connector" + s) }},
		{"grant.egress[0]", func(_ *Plugin, g *Grant, s string) { g.Egress[0] = "api.nbp.pl" + s }},
		{"grant.secrets[0].name", func(_ *Plugin, g *Grant, s string) { g.Secrets[0].Name = "creds" + s }},
		{"grant.secrets[0].secretName", func(_ *Plugin, g *Grant, s string) { g.Secrets[0].SecretName = "other" + s }},
		{"grant.dataTiers[0]", func(_ *Plugin, g *Grant, s string) { g.DataTiers[0] = "accounts" + s }},
		{"grant.imagePullSecrets[0]", func(_ *Plugin, g *Grant, s string) { g.ImagePullSecrets[0] = "regcred" + s }},
	}
	for _, tg := range targets {
		for name, s := range unsafeSamples {
			if strings.Contains(tg.field, "configSchema") && !utf8.ValidString(s) {
				continue // JSON cannot carry invalid UTF-8; the decoder replaces it
			}
			t.Run(tg.field+"/"+name, func(t *testing.T) {
				p := validPlugin()
				p.Manifest.Secrets[0].Name = "creds"
				g := Grant{Name: "fx", Capabilities: []Capability{CapabilityConnector}, Egress: []string{"api.nbp.pl"},
					Secrets: []SecretGrant{{Name: "creds", SecretName: "other"}}, DataTiers: []string{"accounts"}, ImagePullSecrets: []string{"regcred"}}
				tg.apply(&p, &g, s)
				var err error
				if strings.HasPrefix(tg.field, "grant.") {
					err = g.Validate()
				} else {
					err = p.Validate()
				}
				got := problemsOf(t, err)
				if !slices.Equal(got, []problem{{tg.field, ErrUnsafeText}}) {
					t.Fatalf("problems %v, want only %s: %v", got, tg.field, ErrUnsafeText)
				}
				if !errors.Is(err, ErrUnsafeText) {
					t.Fatalf("%v is not ErrUnsafeText", err)
				}
			})
		}
	}
}

// TestTextRuleLabel: the signed manifest label is held to the same rule,
// so `openfief plugin verify` and the operator refuse an attack label.
func TestTextRuleLabel(t *testing.T) {
	label := `{"capabilities":["connector"],"egress":["exfil.example.com"],"secrets":[{"name":"creds","mountPath":"/etc/x\u001b7\u001b[1A\u001b[2K\u001b8"}]}`
	_, err := ParseManifestLabel(label)
	if !errors.Is(err, ErrInvalidLabel) || !errors.Is(err, ErrUnsafeText) || !strings.Contains(err.Error(), "secrets[0].mountPath") {
		t.Fatalf("ParseManifestLabel = %v, want the mount path refused as unsafe text", err)
	}
}

func TestTextRuleBounds(t *testing.T) {
	m := validManifest()
	m.Secrets[0].MountPath = "/opt/" + strings.Repeat("a", MaxMountPathLen)
	m.ConfigSchema = schemaWith(map[string]any{"description": strings.Repeat("d", MaxSchemaText+1)})
	got := problemsOf(t, m.Validate())
	want := []problem{{"manifest.secrets[0].mountPath", ErrUnsafeText}, {`manifest.configSchema["description"]`, ErrUnsafeText}}
	if !slices.Equal(got, want) {
		t.Fatalf("problems %v, want %v", got, want)
	}
}

func TestTextRuleSchemaBytes(t *testing.T) {
	m := validManifest()
	m.ConfigSchema = json.RawMessage("{\"title\":\"a\xffb\"}")
	if got := problemsOf(t, m.Validate()); !slices.Equal(got, []problem{{"manifest.configSchema", ErrUnsafeText}}) {
		t.Fatalf("problems %v, want manifest.configSchema: %v", got, ErrUnsafeText)
	}
}

func schemaWith(v map[string]any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
