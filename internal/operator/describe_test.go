package operator

import "encoding/json"

// describeJSON renders v for a failure message.
func describeJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
