package operator

import (
	"encoding/json"
	"testing"
)

// TestSpecDigest: the digest ignores key order and null members, and
// keeps empty objects apart from absent ones (emptyDir: {} names a volume
// source).
func TestSpecDigest(t *testing.T) {
	digest := func(s string) string {
		t.Helper()
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		d, err := specDigest(v)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	same := [][2]string{
		{`{"a":1,"b":{"c":"x"}}`, `{"b":{"c":"x"},"a":1}`},
		{`{"a":1,"n":null}`, `{"a":1}`},
		{`{"l":[{"x":null,"y":2}]}`, `{"l":[{"y":2}]}`},
	}
	for _, c := range same {
		if digest(c[0]) != digest(c[1]) {
			t.Errorf("%s and %s digest differently", c[0], c[1])
		}
	}
	differ := [][2]string{
		{`{"v":[{"name":"tmp","emptyDir":{}}]}`, `{"v":[{"name":"tmp"}]}`},
		{`{"l":[1,2]}`, `{"l":[2,1]}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":[]}`, `{}`},
	}
	for _, c := range differ {
		if digest(c[0]) == digest(c[1]) {
			t.Errorf("%s and %s digest the same", c[0], c[1])
		}
	}
}
