package plugins

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxManifestFile bounds a manifest.json read from disk: its compacted
// form must still fit the label ParseManifestLabel reads, so anything
// longer than four times that is white space no vendor writes.
const MaxManifestFile = 4 * maxManifestLabelLen

// ManifestLabelValue turns a plugin's manifest.json into the value of its
// io.openfief.plugin.manifest label (D-42): the JSON compacted (white space
// outside strings removed), byte for byte otherwise, accepted by
// ParseManifestLabel. It is the one value every build tool is given, so the
// label of an image built with any of them equals the first-party images'.
// Errors name the field and the rule, as ParseManifestLabel's do.
func ManifestLabelValue(manifestJSON []byte) (string, error) {
	if len(manifestJSON) > MaxManifestFile {
		return "", &FieldError{Field: labelDocument, Err: ErrInvalidLabel, Detail: fmt.Sprintf("manifest file longer than %d bytes", MaxManifestFile)}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, manifestJSON); err != nil {
		return "", &FieldError{Field: labelDocument, Err: ErrInvalidLabel, Detail: "not one JSON document: " + err.Error()}
	}
	label := buf.String()
	if _, err := ParseManifestLabel(label); err != nil {
		return "", err
	}
	return label, nil
}
