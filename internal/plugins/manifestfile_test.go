package plugins

import (
	"errors"
	"strings"
	"testing"
)

func TestManifestLabelValue(t *testing.T) {
	got, err := ManifestLabelValue([]byte("{\n  \"capabilities\": [\"connector\"],\n  \"egress\": [\"api.nbp.pl\"],\n  \"configSchema\": {\"title\": \"a b\", \"type\": \"object\"}\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"capabilities":["connector"],"egress":["api.nbp.pl"],"configSchema":{"title":"a b","type":"object"}}`
	if got != want {
		t.Errorf("ManifestLabelValue\n got %s\nwant %s", got, want)
	}

	for name, tc := range map[string]struct{ in, field string }{
		"not JSON":          {`{"capabilities":`, "label"},
		"two documents":     {`{"capabilities":["view"]} {}`, "label"},
		"unknown field":     {`{"capabilities":["view"],"extra":1}`, "extra"},
		"no capability":     {`{"capabilities":[]}`, "label.capabilities"},
		"an IP egress host": {`{"capabilities":["connector"],"egress":["10.0.0.1"]}`, "label.egress[0]"},
		"too long":          {`{"capabilities":["view"]}` + strings.Repeat(" ", MaxManifestFile), "label"},
	} {
		_, err := ManifestLabelValue([]byte(tc.in))
		var fe *FieldError
		if !errors.Is(err, ErrInvalidLabel) || !errors.As(err, &fe) {
			t.Errorf("%s: error %v, want a FieldError wrapping ErrInvalidLabel", name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %q does not name %s", name, err, tc.field)
		}
	}
}

// FuzzManifestLabelValue: whatever a manifest.json holds, ManifestLabelValue
// never panics, and what it returns is compact, parses, and is its own
// label value.
func FuzzManifestLabelValue(f *testing.F) {
	for _, seed := range []string{
		"{\n \"capabilities\": [\"connector\"],\n \"egress\": [\"api.nbp.pl\"]\n}\n",
		`{"capabilities":["view"],"ownerEgress":1,"secrets":[{"name":"s","mountPath":"/etc/s"}]}`,
		`{"capabilities":["view"],"configSchema":{"title":" spaced  words ","pattern":"\\d"}}`,
		`{"capabilities":["connector"],"resources":{"memory":"512Mi"}}`,
		"{\"capabilities\":[\"\xff\"]}",
		`[]`, ``, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		label, err := ManifestLabelValue(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidLabel) {
				t.Fatalf("error %v does not wrap ErrInvalidLabel", err)
			}
			return
		}
		if _, err := ParseManifestLabel(label); err != nil {
			t.Fatalf("the label value does not parse: %v", err)
		}
		again, err := ManifestLabelValue([]byte(label))
		if err != nil || again != label {
			t.Fatalf("the label value is not its own value: %q, %v", again, err)
		}
	})
}
