package plugins

import "fmt"

// ManifestLabel is the image config label that carries a plugin's manifest.
// The image's signature covers its config, and so the label (D-42).
const ManifestLabel = "io.openfief.plugin.manifest"

// maxManifestLabelLen bounds the label ParseManifestLabel reads.
const maxManifestLabelLen = 256 << 10

// labelDocument names the label in errors about the whole document.
const labelDocument = "label"

// ParseManifestLabel reads the io.openfief.plugin.manifest label strictly
// (D-42): one JSON object with the fields of spec.manifest ("capabilities",
// "egress", "ownerEgress", "secrets", "dataTiers", "configSchema"; ownerEgress
// a JSON integer, OF-36), no unknown, repeated or
// differently spelt field, no trailing data, valid UTF-8. It then validates
// the manifest as Manifest.Validate does. Every error wraps ErrInvalidLabel,
// and validation problems keep their *FieldError (paths start with "label",
// such as "label.egress[1]") and their rule's sentinel.
func ParseManifestLabel(label string) (Manifest, error) {
	if len(label) > maxManifestLabelLen {
		return Manifest{}, &FieldError{Field: labelDocument, Err: ErrInvalidLabel, Detail: fmt.Sprintf("longer than %d bytes", maxManifestLabelLen)}
	}
	var m Manifest
	if path, err := strictDecode([]byte(label), &m); err != nil {
		return Manifest{}, &FieldError{Field: labelField(path), Err: ErrInvalidLabel, Detail: err.Error()}
	}
	if errs := m.validate(labelDocument); len(errs) > 0 {
		return Manifest{}, underSentinel(ErrInvalidLabel, errs).err()
	}
	return m, nil
}

func labelField(path string) string {
	if path == "" {
		return labelDocument
	}
	return labelDocument + "." + path
}
