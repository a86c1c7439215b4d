// Package manifesttest holds the checks every first-party plugin's
// TestManifest makes on its manifest.json (D-42): it parses with the
// operator's ParseManifestLabel, its config schema compiles and agrees with
// the plugin's config type, and the Dockerfile carries it as the label.
package manifesttest

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Load parses manifest.json in the current directory with
// plugins.ParseManifestLabel, as the operator reads the image's label, and
// checks that the Dockerfile beside it carries the same manifest,
// compacted, as its io.openfief.plugin.manifest label.
func Load(t *testing.T) (plugins.Manifest, []byte) {
	t.Helper()
	raw, err := os.ReadFile("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	m, err := plugins.ParseManifestLabel(compact.String())
	if err != nil {
		t.Fatalf("ParseManifestLabel(manifest.json): %v", err)
	}
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := "LABEL " + plugins.ManifestLabel + "='" + compact.String() + "'"
	if !slices.Contains(strings.Split(string(df), "\n"), want) {
		t.Errorf("Dockerfile does not carry manifest.json as its label; run hack/build/plugin-labels.sh write")
	}
	return m, m.ConfigSchema
}

// Schema compiles a manifest's config schema as the operator does (JSON
// Schema draft 2020-12, no outside references).
func Schema(t *testing.T, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("configSchema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("https://config-schema.openfief.invalid/schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://config-schema.openfief.invalid/schema.json")
	if err != nil {
		t.Fatalf("configSchema does not compile: %v", err)
	}
	return s
}

// Accepts reports whether s accepts the JSON document config.
func Accepts(t *testing.T, s *jsonschema.Schema, config string) bool {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(config))
	if err != nil {
		t.Fatalf("config %s: %v", config, err)
	}
	return s.Validate(v) == nil
}

// SameFields checks that the schema's top-level properties are exactly the
// JSON fields of the plugin's config struct cfg, and that the schema
// refuses other fields, as openfief.LoadConfig does.
func SameFields(t *testing.T, schema []byte, cfg any) {
	t.Helper()
	var s struct {
		Type                 string                     `json:"type"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("configSchema must be an object with additionalProperties false")
	}
	var inSchema, inStruct []string
	for k := range s.Properties {
		inSchema = append(inSchema, k)
	}
	rt := reflect.TypeOf(cfg)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			inStruct = append(inStruct, name)
		}
	}
	slices.Sort(inSchema)
	slices.Sort(inStruct)
	if !slices.Equal(inSchema, inStruct) {
		t.Errorf("configSchema properties %v, config fields %v", inSchema, inStruct)
	}
}
