package cli

import (
	"bytes"
	"encoding/json"
	"os"

	"sigs.k8s.io/yaml"
)

// maxConfigFileLen bounds the --config file read.
const maxConfigFileLen = 1 << 20

// readConfig reads a plugin config file, JSON or YAML, which must hold one
// object; it returns compact JSON. JSON is kept as written, so numbers stay
// exact; YAML is converted.
func readConfig(file string) (json.RawMessage, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, exitf(ExitUsage, "--config: %w", err)
	}
	if len(data) > maxConfigFileLen {
		return nil, exitf(ExitInvalid, "--config %s: longer than %d bytes", file, maxConfigFileLen)
	}
	if !json.Valid(data) {
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, exitf(ExitInvalid, "--config %s: neither JSON nor YAML: %w", file, err)
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, exitf(ExitInvalid, "--config %s: %w", file, err)
	}
	if b := buf.Bytes(); len(b) == 0 || b[0] != '{' {
		return nil, exitf(ExitInvalid, "--config %s: config must be an object, not %s", file, kindOf(b))
	}
	return buf.Bytes(), nil
}

// kindOf names the JSON type of a compact value, for errors.
func kindOf(b []byte) string {
	if len(b) == 0 {
		return "empty"
	}
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
