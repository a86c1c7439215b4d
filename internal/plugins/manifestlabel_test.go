package plugins

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseManifestLabel(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		label := `{"capabilities":["connector"],"egress":["api.nbp.pl"],"secrets":[{"name":"bank-credentials","mountPath":"/etc/bank"}],"dataTiers":["transactions"],"configSchema":{"type":"object","properties":{"days":{"type":"integer","maximum":1e2}}}}`
		got, err := ParseManifestLabel(label)
		if err != nil {
			t.Fatalf("ParseManifestLabel: %v", err)
		}
		want := Manifest{
			Capabilities: []Capability{CapabilityConnector},
			Egress:       []string{"api.nbp.pl"},
			Secrets:      []SecretMount{{Name: "bank-credentials", MountPath: "/etc/bank"}},
			DataTiers:    []string{"transactions"},
			ConfigSchema: json.RawMessage(`{"type":"object","properties":{"days":{"type":"integer","maximum":1e2}}}`),
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ParseManifestLabel\n got %+v\nwant %+v", got, want)
		}
	})
	t.Run("minimal", func(t *testing.T) {
		got, err := ParseManifestLabel(` {"capabilities": ["view"]} `)
		if err != nil {
			t.Fatalf("ParseManifestLabel: %v", err)
		}
		if !got.Equal(Manifest{Capabilities: []Capability{CapabilityView}}) {
			t.Errorf("ParseManifestLabel = %+v", got)
		}
	})

	tests := map[string]struct {
		label     string
		wantErr   error // besides ErrInvalidLabel
		wantField string
	}{
		"empty":                        {label: ``, wantField: "label"},
		"not JSON":                     {label: `capabilities=connector`, wantField: "label"},
		"JSON null":                    {label: `null`, wantErr: ErrRequired, wantField: "label.capabilities"},
		"an array":                     {label: `[]`, wantField: "label"},
		"no capability":                {label: `{}`, wantErr: ErrRequired, wantField: "label.capabilities"},
		"unknown field":                {label: `{"capabilities":["connector"],"network":"host"}`, wantField: "label"},
		"field in another case":        {label: `{"Capabilities":["connector"]}`, wantField: "label"},
		"repeated field":               {label: `{"capabilities":["connector"],"egress":["a.example"],"egress":["b.example"]}`, wantField: "label"},
		"unknown Secret field":         {label: `{"capabilities":["connector"],"secrets":[{"name":"s","mountPath":"/s","readOnly":false}]}`, wantField: "label.secrets[0]"},
		"Secret field in another case": {label: `{"capabilities":["connector"],"secrets":[{"name":"s","MountPath":"/s"}]}`, wantField: "label.secrets[0]"},
		"repeated key in the schema":   {label: `{"capabilities":["connector"],"configSchema":{"type":"object","type":"string"}}`, wantField: "label.configSchema"},
		"trailing data":                {label: `{"capabilities":["connector"]} {}`, wantField: "label"},
		"trailing garbage":             {label: `{"capabilities":["connector"]}]`, wantField: "label"},
		"invalid UTF-8":                {label: "{\"capabilities\":[\"connector\"],\"dataTiers\":[\"\xc3\x28\"]}", wantField: "label"},
		"egress as a string":           {label: `{"capabilities":["connector"],"egress":"api.example.com"}`, wantField: "label.egress"},
		"unknown capability":           {label: `{"capabilities":["admin"]}`, wantErr: ErrInvalidCapability, wantField: "label.capabilities[0]"},
		"wildcard host":                {label: `{"capabilities":["connector"],"egress":["*.example.com"]}`, wantErr: ErrInvalidEgressHost, wantField: "label.egress[0]"},
		"IP literal":                   {label: `{"capabilities":["connector"],"egress":["10.0.0.1"]}`, wantErr: ErrInvalidEgressHost, wantField: "label.egress[0]"},
		"the same host twice":          {label: `{"capabilities":["connector"],"egress":["a.example","A.example:443"]}`, wantErr: ErrDuplicate, wantField: "label.egress[1]"},
		"mount over the tokens":        {label: `{"capabilities":["connector"],"secrets":[{"name":"s","mountPath":"/var/run/secrets/openfief"}]}`, wantErr: ErrInvalidMountPath, wantField: "label.secrets[0].mountPath"},
		"bad data tier":                {label: `{"capabilities":["connector"],"dataTiers":["a b"]}`, wantErr: ErrInvalidDataTier, wantField: "label.dataTiers[0]"},
		"schema is a string":           {label: `{"capabilities":["connector"],"configSchema":"object"}`, wantErr: ErrInvalidJSON, wantField: "label.configSchema"},
		"schema is null":               {label: `{"capabilities":["connector"],"configSchema":null}`, wantErr: ErrInvalidJSON, wantField: "label.configSchema"},
		"too long":                     {label: `{"capabilities":["connector"]}` + strings.Repeat(" ", maxManifestLabelLen), wantField: "label"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseManifestLabel(tc.label)
			trCheckErr(t, err, ErrInvalidLabel, tc.wantField)
			if tc.wantErr != nil {
				trCheckErr(t, err, tc.wantErr, tc.wantField)
			}
		})
	}
}

// TestParseManifestLabelReportsEveryProblem checks validation problems all
// come back at once, each still a *FieldError.
func TestParseManifestLabelReportsEveryProblem(t *testing.T) {
	_, err := ParseManifestLabel(`{"capabilities":["admin"],"egress":["localhost"],"dataTiers":[""]}`)
	got := trErrFields(err)
	want := []string{"label.capabilities[0]", "label.egress[0]", "label.dataTiers[0]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %q, want %q (error %v)", got, want, err)
	}
}
