package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// validManifest is a manifest every rule accepts; tests change one thing.
func validManifest() Manifest {
	return Manifest{
		Capabilities: []Capability{CapabilityConnector},
		Egress:       []string{"api.nbp.pl", "static.nbp.pl:8443"},
		Secrets:      []SecretMount{{Name: "ibkr-flex-credentials", MountPath: "/etc/openfief/ibkr"}},
		DataTiers:    []string{"transactions", "fx_rates"},
		ConfigSchema: json.RawMessage(`{"type":"object","properties":{"currency":{"type":"string"}}}`),
	}
}

func validPlugin() Plugin {
	return Plugin{Name: "nbp-fx", Image: "ghcr.io/arkadiuss/openfief/nbp-fx@" + testDigest, Manifest: validManifest(), Config: json.RawMessage(`{"currency":"PLN"}`)}
}

// problem is one expected FieldError: its path and its sentinel.
type problem struct {
	field string
	err   error
}

// problemsOf flattens a joined validation error into its field problems,
// failing the test on anything that is not a *FieldError.
func problemsOf(t *testing.T, err error) []problem {
	t.Helper()
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a joined error: %v", err, err)
	}
	var out []problem
	for _, e := range j.Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		if !errors.Is(e, fe.Err) {
			t.Fatalf("%v does not unwrap to its sentinel", e)
		}
		out = append(out, problem{fe.Field, fe.Err})
	}
	return out
}

func TestPluginValidate(t *testing.T) {
	tests := map[string]struct {
		mutate func(p *Plugin)
		want   []problem
	}{
		"valid":                    {mutate: func(p *Plugin) {}},
		"no config":                {mutate: func(p *Plugin) { p.Config = nil }},
		"no schema":                {mutate: func(p *Plugin) { p.Manifest.ConfigSchema = nil }},
		"boolean schema":           {mutate: func(p *Plugin) { p.Manifest.ConfigSchema = json.RawMessage(`true`) }},
		"view only":                {mutate: func(p *Plugin) { p.Manifest.Capabilities = []Capability{CapabilityView} }},
		"name at the limit":        {mutate: func(p *Plugin) { p.Name = "a" + strings.Repeat("b", MaxNameLength-1) }},
		"empty name":               {mutate: func(p *Plugin) { p.Name = "" }, want: []problem{{"name", ErrRequired}}},
		"name too long":            {mutate: func(p *Plugin) { p.Name = strings.Repeat("a", MaxNameLength+1) }, want: []problem{{"name", ErrInvalidName}}},
		"name starts with a digit": {mutate: func(p *Plugin) { p.Name = "1fx" }, want: []problem{{"name", ErrInvalidName}}},
		"name upper case":          {mutate: func(p *Plugin) { p.Name = "NBP" }, want: []problem{{"name", ErrInvalidName}}},
		"name ends with hyphen":    {mutate: func(p *Plugin) { p.Name = "nbp-" }, want: []problem{{"name", ErrInvalidName}}},
		"name with dot":            {mutate: func(p *Plugin) { p.Name = "nbp.fx" }, want: []problem{{"name", ErrInvalidName}}},
		"image by tag":             {mutate: func(p *Plugin) { p.Image = "ghcr.io/x/y:1.0" }, want: []problem{{"image", ErrInvalidImage}}},
		"image tag and digest":     {mutate: func(p *Plugin) { p.Image = "ghcr.io/x/y:1.0@" + testDigest }, want: []problem{{"image", ErrInvalidImage}}},
		"config not JSON":          {mutate: func(p *Plugin) { p.Config = json.RawMessage(`{`) }, want: []problem{{"config", ErrInvalidJSON}}},
		"config not an object":     {mutate: func(p *Plugin) { p.Config = json.RawMessage(`[1]`) }, want: []problem{{"config", ErrInvalidJSON}}},
		"config trailing data":     {mutate: func(p *Plugin) { p.Config = json.RawMessage(`{} {}`) }, want: []problem{{"config", ErrInvalidJSON}}},
		"schema not JSON":          {mutate: func(p *Plugin) { p.Manifest.ConfigSchema = json.RawMessage(`{"type":`) }, want: []problem{{"manifest.configSchema", ErrInvalidJSON}}},
		"schema a string":          {mutate: func(p *Plugin) { p.Manifest.ConfigSchema = json.RawMessage(`"object"`) }, want: []problem{{"manifest.configSchema", ErrInvalidJSON}}},
		"every problem at once": {
			mutate: func(p *Plugin) {
				p.Name = "Bad"
				p.Image = "repo:tag"
				p.Manifest.Egress = []string{"api.nbp.pl", "10.0.0.1", "API.nbp.pl:443"}
				p.Config = json.RawMessage(`nope`)
			},
			want: []problem{
				{"name", ErrInvalidName},
				{"image", ErrInvalidImage},
				{"manifest.egress[1]", ErrInvalidEgressHost},
				{"manifest.egress[2]", ErrDuplicate},
				{"config", ErrInvalidJSON},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := validPlugin()
			tc.mutate(&p)
			got := problemsOf(t, p.Validate())
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate() problems\n got %v\nwant %v\nerror: %v", got, tc.want, p.Validate())
			}
		})
	}
}

func TestManifestValidate(t *testing.T) {
	tests := map[string]struct {
		mutate func(m *Manifest)
		want   []problem
	}{
		"valid":                      {mutate: func(m *Manifest) {}},
		"no capability":              {mutate: func(m *Manifest) { m.Capabilities = nil }, want: []problem{{"manifest.capabilities", ErrRequired}}},
		"unknown capability":         {mutate: func(m *Manifest) { m.Capabilities = []Capability{"admin"} }, want: []problem{{"manifest.capabilities[0]", ErrInvalidCapability}}},
		"repeated capability":        {mutate: func(m *Manifest) { m.Capabilities = []Capability{"view", "connector", "view"} }, want: []problem{{"manifest.capabilities[2]", ErrDuplicate}}},
		"wildcard host":              {mutate: func(m *Manifest) { m.Egress = []string{"*.nbp.pl"} }, want: []problem{{"manifest.egress[0]", ErrInvalidEgressHost}}},
		"single-label host":          {mutate: func(m *Manifest) { m.Egress = []string{"api.nbp.pl", "core"} }, want: []problem{{"manifest.egress[1]", ErrInvalidEgressHost}}},
		"host repeated by port":      {mutate: func(m *Manifest) { m.Egress = []string{"api.nbp.pl:443", "api.nbp.pl"} }, want: []problem{{"manifest.egress[1]", ErrDuplicate}}},
		"other port is another host": {mutate: func(m *Manifest) { m.Egress = []string{"api.nbp.pl:443", "api.nbp.pl:8443"} }},
		"too many hosts": {
			mutate: func(m *Manifest) {
				m.Egress = nil
				for i := range MaxEgressHosts + 1 {
					m.Egress = append(m.Egress, fmt.Sprintf("h%d.example", i))
				}
			},
			want: []problem{{"manifest.egress", ErrInvalidEgressHost}},
		},
		"secret bad name":    {mutate: func(m *Manifest) { m.Secrets[0].Name = "Creds" }, want: []problem{{"manifest.secrets[0].name", ErrInvalidSecretName}}},
		"secret dotted name": {mutate: func(m *Manifest) { m.Secrets[0].Name = "ibkr.creds" }},
		"secret repeated": {
			mutate: func(m *Manifest) {
				m.Secrets = append(m.Secrets, SecretMount{Name: "ibkr-flex-credentials", MountPath: "/etc/other"})
			},
			want: []problem{{"manifest.secrets[1].name", ErrDuplicate}},
		},
		"mount relative":         {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "etc/ibkr" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount not clean":        {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/etc/../ibkr" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount trailing slash":   {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/etc/ibkr/" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount root":             {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount empty":            {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount in token dir":     {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/var/run/secrets/openfief" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount on token dir":     {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/var/run/secrets" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount above token dir":  {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/var/run" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount beside token dir": {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/var/run/secrets-not" }},
		// The operator's scratch emptyDir is at /tmp: a Secret there made the
		// apply fail for ever.
		"mount on tmp":        {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/tmp" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount in tmp":        {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/tmp/creds" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount in proc":       {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/proc/self" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount above dev":     {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/dev" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount hides etc":     {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/etc" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount hides usr":     {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/usr" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount hides var":     {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/var" }, want: []problem{{"manifest.secrets[0].mountPath", ErrInvalidMountPath}}},
		"mount under usr":     {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/usr/share/plugin" }},
		"mount beside tmp":    {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/tmpx" }},
		"mount top-level own": {mutate: func(m *Manifest) { m.Secrets[0].MountPath = "/creds" }},
		"mounts overlap": {
			mutate: func(m *Manifest) {
				m.Secrets = append(m.Secrets, SecretMount{Name: "other", MountPath: "/etc/openfief/ibkr/sub"})
			},
			want: []problem{{"manifest.secrets[1].mountPath", ErrInvalidMountPath}},
		},
		"mounts share a prefix only": {
			mutate: func(m *Manifest) {
				m.Secrets = append(m.Secrets, SecretMount{Name: "other", MountPath: "/etc/openfief/ibkr2"})
			},
		},
		"same mount twice": {
			mutate: func(m *Manifest) {
				m.Secrets = append(m.Secrets, SecretMount{Name: "other", MountPath: "/etc/openfief/ibkr"})
			},
			want: []problem{{"manifest.secrets[1].mountPath", ErrInvalidMountPath}},
		},
		"tier too long":   {mutate: func(m *Manifest) { m.DataTiers = []string{strings.Repeat("t", 33)} }, want: []problem{{"manifest.dataTiers[0]", ErrInvalidDataTier}}},
		"tier at limit":   {mutate: func(m *Manifest) { m.DataTiers = []string{strings.Repeat("T", 32)} }},
		"tier empty":      {mutate: func(m *Manifest) { m.DataTiers = []string{""} }, want: []problem{{"manifest.dataTiers[0]", ErrInvalidDataTier}}},
		"tier with space": {mutate: func(m *Manifest) { m.DataTiers = []string{"fx rates"} }, want: []problem{{"manifest.dataTiers[0]", ErrInvalidDataTier}}},
		"tier repeated":   {mutate: func(m *Manifest) { m.DataTiers = []string{"a", "b", "a"} }, want: []problem{{"manifest.dataTiers[2]", ErrDuplicate}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := validManifest()
			tc.mutate(&m)
			got := problemsOf(t, m.Validate())
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate() problems\n got %v\nwant %v\nerror: %v", got, tc.want, m.Validate())
			}
		})
	}
}

func TestGrantValidate(t *testing.T) {
	valid := func() Grant {
		return Grant{
			Name:         "nbp-fx",
			Capabilities: []Capability{CapabilityConnector},
			Egress:       []string{"api.nbp.pl"},
			Secrets:      []SecretGrant{{Name: "ibkr-flex-credentials", SecretName: "ibkr-account-2"}, {Name: "other"}},
			DataTiers:    []string{"transactions"},

			ImagePullSecrets: []string{"regcred", "ghcr.io-pull"},
		}
	}
	tests := map[string]struct {
		mutate func(g *Grant)
		want   []problem
	}{
		"valid":                        {mutate: func(g *Grant) {}},
		"empty grant approves nothing": {mutate: func(g *Grant) { *g = Grant{Name: "nbp-fx"} }},
		"bad name":                     {mutate: func(g *Grant) { g.Name = "-x" }, want: []problem{{"grant.name", ErrInvalidName}}},
		"unknown capability":           {mutate: func(g *Grant) { g.Capabilities = []Capability{"root"} }, want: []problem{{"grant.capabilities[0]", ErrInvalidCapability}}},
		"ip host":                      {mutate: func(g *Grant) { g.Egress = []string{"1.2.3.4:443"} }, want: []problem{{"grant.egress[0]", ErrInvalidEgressHost}}},
		"bad slot":                     {mutate: func(g *Grant) { g.Secrets[0].Name = "A" }, want: []problem{{"grant.secrets[0].name", ErrInvalidSecretName}}},
		"bad binding":                  {mutate: func(g *Grant) { g.Secrets[0].SecretName = "under_score" }, want: []problem{{"grant.secrets[0].secretName", ErrInvalidSecretName}}},
		"slot granted twice":           {mutate: func(g *Grant) { g.Secrets[1].Name = g.Secrets[0].Name }, want: []problem{{"grant.secrets[1].name", ErrDuplicate}}},
		"bad tier":                     {mutate: func(g *Grant) { g.DataTiers = []string{"ä"} }, want: []problem{{"grant.dataTiers[0]", ErrInvalidDataTier}}},
		"bad pull secret": {
			mutate: func(g *Grant) { g.ImagePullSecrets = []string{"ok", "Reg_Cred", ""} },
			want:   []problem{{"grant.imagePullSecrets[1]", ErrInvalidSecretName}, {"grant.imagePullSecrets[2]", ErrInvalidSecretName}},
		},
		"pull secret twice": {
			mutate: func(g *Grant) { g.ImagePullSecrets = []string{"regcred", "other", "regcred"} },
			want:   []problem{{"grant.imagePullSecrets[2]", ErrDuplicate}},
		},
		"eight pull secrets": {mutate: func(g *Grant) { g.ImagePullSecrets = pullSecretNames(MaxImagePullSecrets) }},
		"nine pull secrets": {
			mutate: func(g *Grant) { g.ImagePullSecrets = pullSecretNames(MaxImagePullSecrets + 1) },
			want:   []problem{{"grant.imagePullSecrets", ErrInvalidSecretName}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := valid()
			tc.mutate(&g)
			got := problemsOf(t, g.Validate())
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate() problems\n got %v\nwant %v\nerror: %v", got, tc.want, g.Validate())
			}
		})
	}
}

// pullSecretNames returns n distinct Secret names.
func pullSecretNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("pull-%d", i)
	}
	return out
}

func TestFieldErrorMessage(t *testing.T) {
	p := validPlugin()
	p.Manifest.Egress = []string{"api.nbp.pl", "*.nbp.pl"}
	err := p.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{"manifest.egress[1]", "invalid egress host", "wildcards"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, ErrInvalidEgressHost) {
		t.Errorf("errors.Is(err, ErrInvalidEgressHost) = false for %v", err)
	}
}
