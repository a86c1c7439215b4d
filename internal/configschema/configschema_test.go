package configschema

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestValidate(t *testing.T) {
	const object = `{"type":"object","properties":{"account":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["account"],"additionalProperties":false}`
	tests := map[string]struct {
		schema, config string
		want           error  // nil, ErrInvalidConfig or ErrInvalidSchema
		wantMsg        string // a substring of the error
	}{
		"valid":                           {schema: object, config: `{"account":"main","days":3}`},
		"no schema, no config":            {},
		"no schema, any object":           {config: `{"anything":[1,2,{"x":null}]}`},
		"missing config is {}":            {schema: `{"type":"object","properties":{"a":{"type":"string"}}}`},
		"missing config is {}, required":  {schema: object, want: ErrInvalidConfig, wantMsg: `at "": missing property 'account'`},
		"whitespace config is {}":         {schema: `{"type":"object"}`, config: " \n\t"},
		"invalid type":                    {schema: object, config: `{"account":7}`, want: ErrInvalidConfig, wantMsg: `at "/account": got number, want string`},
		"missing required":                {schema: object, config: `{"days":2}`, want: ErrInvalidConfig, wantMsg: `missing property 'account'`},
		"minimum":                         {schema: object, config: `{"account":"a","days":0}`, want: ErrInvalidConfig, wantMsg: `at "/days": minimum`},
		"additional property":             {schema: object, config: `{"account":"a","x":1}`, want: ErrInvalidConfig, wantMsg: `additional properties 'x' not allowed`},
		"config not an object":            {schema: `true`, config: `[1]`, want: ErrInvalidConfig, wantMsg: "JSON object"},
		"config not an object, no schema": {config: `"x"`, want: ErrInvalidConfig},
		"config not JSON":                 {config: `{"a":`, want: ErrInvalidConfig, wantMsg: "not JSON"},
		"config trailing data":            {config: `{} {}`, want: ErrInvalidConfig},
		"true schema":                     {schema: `true`, config: `{"a":1}`},
		"false schema":                    {schema: `false`, want: ErrInvalidConfig},
		"schema not JSON":                 {schema: `{"type":`, want: ErrInvalidSchema, wantMsg: "not JSON"},
		"schema a string":                 {schema: `"object"`, want: ErrInvalidSchema, wantMsg: "object or a boolean"},
		"schema breaks its meta-schema":   {schema: `{"type":"objekt"}`, want: ErrInvalidSchema, wantMsg: `at "/type"`},
		"schema bad regexp":               {schema: `{"pattern":"("}`, want: ErrInvalidSchema},
		"pointer escapes":                 {schema: `{"properties":{"a/b~c":{"type":"string"}}}`, config: `{"a/b~c":1}`, want: ErrInvalidConfig, wantMsg: `at "/a~1b~0c"`},
		"ref to $defs": {
			schema: `{"$defs":{"port":{"type":"integer","maximum":65535}},"properties":{"port":{"$ref":"#/$defs/port"}}}`,
			config: `{"port":443}`,
		},
		"ref to $defs, invalid": {
			schema: `{"$defs":{"port":{"type":"integer","maximum":65535}},"properties":{"port":{"$ref":"#/$defs/port"}}}`,
			config: `{"port":70000}`, want: ErrInvalidConfig, wantMsg: `at "/port": maximum`,
		},
		"ref to an anchor": {
			schema: `{"$defs":{"p":{"$anchor":"port","type":"integer"}},"properties":{"port":{"$ref":"#port"}}}`,
			config: `{"port":"x"}`, want: ErrInvalidConfig, wantMsg: `at "/port": got string, want integer`,
		},
		"ref to the root": {
			schema: `{"type":"object","properties":{"child":{"$ref":"#"}},"additionalProperties":{"type":"integer"}}`,
			config: `{"child":{"child":{"x":"y"}}}`, want: ErrInvalidConfig, wantMsg: `at "/child/child/x"`,
		},
		"embedded resource with its own $id": {
			schema: `{"$defs":{"p":{"$id":"https://example.com/port.json","type":"integer"}},"properties":{"port":{"$ref":"https://example.com/port.json"}}}`,
			config: `{"port":1}`,
		},
		"ref to a missing $defs": {schema: `{"$ref":"#/$defs/nope"}`, want: ErrInvalidSchema},
		"draft 2020-12 meta-schema": {
			schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}],"type":"object","properties":{"l":{"prefixItems":[{"type":"string"}]}}}`,
			config: `{"l":[1]}`, want: ErrInvalidConfig, wantMsg: `at "/l/0": got number, want string`,
		},
		"draft-07 meta-schema": {
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"d":{"type":"boolean"}},"properties":{"on":{"$ref":"#/definitions/d"}},"dependencies":{"on":["why"]}}`,
			config: `{"on":true}`, want: ErrInvalidConfig, wantMsg: `properties 'why' required, if 'on' exists`,
		},
		"draft-07 meta-schema, valid": {
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"d":{"type":"boolean"}},"properties":{"on":{"$ref":"#/definitions/d"}}}`,
			config: `{"on":false}`,
		},
		"ref to the 2020-12 meta-schema": {
			schema: `{"properties":{"inner":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}}`,
			config: `{"inner":{"type":"nonsense"}}`, want: ErrInvalidConfig,
		},
		"ref to the draft-07 meta-schema": {
			schema: `{"properties":{"inner":{"$ref":"http://json-schema.org/draft-07/schema#"}}}`,
			config: `{"inner":{"type":"string"}}`,
		},
		"pattern never echoes the value": {
			schema: `{"properties":{"iban":{"type":"string","pattern":"^[A-Z]{2}$"}}}`,
			config: `{"iban":"DE89370400440532013000"}`, want: ErrInvalidConfig, wantMsg: `at "/iban": does not match pattern "^[A-Z]{2}$"`,
		},
		"format never echoes the value": {
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"mail":{"type":"string","format":"email"}}}`,
			config: `{"mail":"SECRET-not-an-email"}`, want: ErrInvalidConfig, wantMsg: `at "/mail": is not a valid "email"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Validate([]byte(tc.schema), []byte(tc.config))
			checkConfigError(t, err, tc.want, tc.wantMsg)
			if err != nil && strings.Contains(err.Error(), "SECRET") || err != nil && strings.Contains(err.Error(), "DE89") {
				t.Errorf("error echoes the config's value: %v", err)
			}
		})
	}
}

// TestValidateConfigRefusesOutsideReferences: a schema can't make the operator
// read a file or reach the network. Each document would have compiled had it
// been read, so only the refusal explains the error.
func TestValidateRefusesOutsideReferences(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"type":"object"}`)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		schema  string
		wantURL string // the URL the compiler asked for and was refused
	}{
		"file URL":           {schema: `{"$ref":"file:///etc/passwd"}`, wantURL: "file:///etc/passwd"},
		"file URL, existing": {schema: `{"$ref":"file://` + file + `"}`, wantURL: "file://" + file},
		"https URL":          {schema: `{"$ref":"https://example.com/s.json"}`, wantURL: "https://example.com/s.json"},
		"http URL, served":   {schema: `{"$ref":"` + srv.URL + `/s.json"}`, wantURL: srv.URL + "/s.json"},
		"relative reference": {schema: `{"$ref":"other.json"}`, wantURL: "https://config-schema.openfief.invalid/other.json"},
		"absolute path":      {schema: `{"$ref":"/etc/passwd"}`, wantURL: "https://config-schema.openfief.invalid/etc/passwd"},
		"nested reference":   {schema: `{"properties":{"a":{"items":{"$ref":"https://example.com/s.json#/x"}}}}`, wantURL: "https://example.com/s.json"},
		"custom meta-schema": {schema: `{"$schema":"https://example.com/meta.json"}`, wantURL: "https://example.com/meta.json"},
		"unknown json-schema.org document": {
			schema: `{"$ref":"https://json-schema.org/draft/2099-01/schema"}`, wantURL: "https://json-schema.org/draft/2099-01/schema",
		},
		"dynamicRef": {schema: `{"$dynamicRef":"https://example.com/s.json"}`, wantURL: "https://example.com/s.json"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				asked []string
			)
			err := validateConfig([]byte(tc.schema), []byte(`{}`), func(url string) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, url)
			})
			checkConfigError(t, err, ErrInvalidSchema, "")
			if !errors.Is(err, ErrSchemaRefRefused) {
				t.Errorf("error %v does not wrap ErrSchemaRefRefused", err)
			}
			if len(asked) != 1 || asked[0] != tc.wantURL {
				t.Errorf("loader asked for %q, want exactly [%q]", asked, tc.wantURL)
			}
			if !strings.Contains(err.Error(), tc.wantURL) {
				t.Errorf("error %q does not name %q", err, tc.wantURL)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the test server got %d requests, want none", n)
	}
}

// TestValidateConfigNeverAsksForMetaSchemas: the standard meta-schemas come
// from the library's embedded copies, never from the loader.
func TestValidateNeverAsksForMetaSchemas(t *testing.T) {
	for _, meta := range []string{
		"https://json-schema.org/draft/2020-12/schema",
		"https://json-schema.org/draft/2019-09/schema",
		"http://json-schema.org/draft-07/schema#",
		"http://json-schema.org/draft-06/schema#",
		"http://json-schema.org/draft-04/schema#",
	} {
		for _, key := range []string{"$schema", "$ref"} {
			schema := fmt.Sprintf(`{%q:%q}`, key, meta)
			err := validateConfig([]byte(schema), []byte(`{}`), func(url string) {
				t.Errorf("%s: loader asked for %q", schema, url)
			})
			if err != nil {
				t.Errorf("%s: %v", schema, err)
			}
		}
	}
}

// TestValidateConfigBounds: huge, deep and cyclic schemas and configs give an
// error or a verdict, never a panic or a hang.
func TestValidateBounds(t *testing.T) {
	deepSchema := func(depth int) string {
		return strings.Repeat(`{"properties":{"a":`, depth) + `{"type":"string"}` + strings.Repeat(`}}`, depth)
	}
	deepConfig := func(depth int) string {
		return strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
	}
	manyProps := func(n int) (schema, config string) {
		var s, c []string
		for i := range n {
			s = append(s, fmt.Sprintf(`"p%03d":{"type":"string"}`, i))
			c = append(c, fmt.Sprintf(`"p%03d":%d`, i, i))
		}
		return `{"properties":{` + strings.Join(s, ",") + `}}`, `{` + strings.Join(c, ",") + `}`
	}
	manySchema, manyConfig := manyProps(50)
	// refFan(n) checks "x" against 2^n paths through anyOf and $ref.
	refFan := func(n int) string {
		var defs []string
		for i := range n {
			defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
		}
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string"}`, n))
		return `{"$defs":{` + strings.Join(defs, ",") + `},"properties":{"x":{"$ref":"#/$defs/d0"}}}`
	}

	tests := map[string]struct {
		schema, config string
		want           error
		wantMsg        string
	}{
		"deep schema and config":          {schema: deepSchema(45), config: deepConfig(45), want: ErrInvalidConfig, wantMsg: "got number, want string"},
		"schema too deep":                 {schema: deepSchema(2000), config: deepConfig(2000), want: ErrInvalidSchema, wantMsg: "nested deeper than 100"},
		"deep config":                     {schema: `{"type":"object"}`, config: deepConfig(5000)},
		"references unfold exponentially": {schema: refFan(30), config: `{"x":1}`, want: ErrInvalidSchema, wantMsg: "unfolds to more than"},
		"references unfold a little":      {schema: refFan(10), config: `{"x":1}`, want: ErrInvalidConfig, wantMsg: `at "/x": got number, want string`},
		"too deep to decode":              {schema: strings.Repeat("[", 20000) + strings.Repeat("]", 20000), want: ErrInvalidSchema},
		"config too deep":                 {config: strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000), want: ErrInvalidConfig},
		"huge schema":                     {schema: `{"description":"` + strings.Repeat("x", maxSchemaBytes) + `"}`, want: ErrInvalidSchema, wantMsg: "longer than"},
		"cycle through $ref":              {schema: `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, want: ErrInvalidSchema},
		"self reference":                  {schema: `{"$ref":"#"}`, want: ErrInvalidSchema},
		"many problems capped":            {schema: manySchema, config: manyConfig, want: ErrInvalidConfig, wantMsg: "; and 42 more"},
		"long property name": {
			schema: `{"required":["` + strings.Repeat("é", 500) + `"]}`, want: ErrInvalidConfig, wantMsg: "...",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Validate([]byte(tc.schema), []byte(tc.config))
			checkConfigError(t, err, tc.want, tc.wantMsg)
			if err != nil && len(err.Error()) > 2048 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

func FuzzValidate(f *testing.F) {
	for _, seed := range [][2]string{
		{``, ``},
		{`true`, `{}`},
		{`{"type":"object","required":["a"],"properties":{"a":{"type":"string","pattern":"^x"}}}`, `{"a":"y"}`},
		{`{"$defs":{"x":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/x"}}}`, `{"n":1.5}`},
		{`{"$ref":"file:///etc/passwd"}`, `{}`},
		{`{"$ref":"https://example.com/s.json"}`, `{}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":["b"]}}`, `{"a":1}`},
		{`{"$id":"http://json-schema.org/draft-07/schema","$ref":"#"}`, `{}`},
		{`{"$dynamicAnchor":"a","$dynamicRef":"#a"}`, `{}`},
		{`{"oneOf":[{"type":"object"},{"minProperties":0}]}`, `{}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, schema, config []byte) {
		err := validateConfig(schema, config, func(string) {})
		again := validateConfig(schema, config, nil)
		if (err == nil) != (again == nil) || err != nil && err.Error() != again.Error() {
			t.Fatalf("not deterministic: %v, then %v", err, again)
		}
		if err == nil {
			return
		}
		if errors.Is(err, ErrInvalidConfig) == errors.Is(err, ErrInvalidSchema) {
			t.Fatalf("error %v wraps neither or both of ErrInvalidConfig and ErrInvalidSchema", err)
		}
		if len(err.Error()) > 2048 {
			t.Fatalf("error is %d bytes long", len(err.Error()))
		}
	})
}

// checkConfigError checks that err wraps want (nil: no error) and contains
// wantMsg.
func checkConfigError(t *testing.T, err, want error, wantMsg string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("got error %v, want none", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("got error %v, want one wrapping %v", err, want)
	case err != nil && !strings.Contains(err.Error(), wantMsg):
		t.Fatalf("error %q does not contain %q", err, wantMsg)
	}
}

// recursiveFan is a schema whose property "a" refers back to the whole
// schema through branches alternatives, so each level of a config nested
// under "a" multiplies the library's work by branches.
func recursiveFan(branches int) string {
	refs := make([]string, branches)
	for i := range refs {
		refs[i] = `{"$ref":"#"}`
	}
	return `{"type":"object","properties":{"a":{"anyOf":[` + strings.Join(refs, ",") + `]}}}`
}

// failingFan is recursiveFan where every object needs "a", so the innermost
// {} fails and the library tries every branch at every level.
func failingFan(branches int) string {
	return strings.Replace(recursiveFan(branches), `{"type":"object",`, `{"type":"object","required":["a"],`, 1)
}

// nestedA is a config nested levels deep under "a".
func nestedA(levels int) string {
	return strings.Repeat(`{"a":`, levels) + `{}` + strings.Repeat(`}`, levels)
}

// TestValidateEvaluationBudget is the regression test of the adversarial
// review's second finding: a 2.4 KB schema whose 64 branches recurse took
// 12.9 s on a three-level config, because the schema-only bound counts a
// reference back into the schema once. Validate now counts the work for the
// actual config first and refuses what exceeds the budget, while the same
// schema with a shallow config, and ordinary recursive schemas, still pass.
func TestValidateEvaluationBudget(t *testing.T) {
	tests := map[string]struct {
		schema, config string
		want           error
		wantMsg        string
	}{
		"64 branches, 4 levels": {schema: recursiveFan(64), config: nestedA(4), want: ErrInvalidSchema, wantMsg: "would take more than"},
		"64 branches, 2 levels": {schema: recursiveFan(64), config: nestedA(2)},
		"2 branches, 8 levels":  {schema: recursiveFan(2), config: nestedA(8)},
		"2 branches, 40 levels": {schema: recursiveFan(2), config: nestedA(40), want: ErrInvalidSchema, wantMsg: "would take more than"},
		"linked list 1000 deep": {
			schema: `{"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"},"v":{"type":"integer"}}}},"$ref":"#/$defs/node"}`,
			config: strings.Repeat(`{"v":1,"next":`, 1000) + `{}` + strings.Repeat(`}`, 1000),
		},
		"unique items, huge array": {
			schema: `{"properties":{"xs":{"type":"array","uniqueItems":true}}}`,
			config: `{"xs":[` + strings.TrimSuffix(strings.Repeat(`0,`, 2000), ",") + `]}`,
			want:   ErrInvalidSchema, wantMsg: "would take more than",
		},
		"dynamic reference to every anchor": {
			schema: `{"$dynamicAnchor":"n","properties":{"a":{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"$dynamicRef":"#n"},`, 32), ",") + `]}}}`,
			config: nestedA(5), want: ErrInvalidSchema, wantMsg: "would take more than",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkConfigError(t, Validate([]byte(tc.schema), []byte(tc.config)), tc.want, tc.wantMsg)
		})
	}
}

// BenchmarkValidateWorstAccepted measures the most expensive checks the
// budget lets through, beside a plain one; compare the ns/op in one run.
func BenchmarkValidateWorstAccepted(b *testing.B) {
	cases := map[string][2]string{
		"plain":                               {`{"type":"object","properties":{"account":{"type":"string"}}}`, `{"account":"main"}`},
		"fan 64 x 2 levels":                   {recursiveFan(64), nestedA(2)},
		"fan 2 x 16 levels":                   {recursiveFan(2), nestedA(16)},
		"enum 60k, 4 values":                  {`{"additionalProperties":{"enum":[` + strings.TrimSuffix(strings.Repeat(`"v",`, 60000), ",") + `,"x"]}}`, `{"a":"x","b":"x","c":"x","d":"x"}`},
		"failing fan 4 x 7 (near the budget)": {failingFan(4), nestedA(7)},
		"failing fan 8 x 5 (refused)":         {failingFan(8), nestedA(5)},
		"failing fan 2 x 16":                  {failingFan(2), nestedA(16)},
		"failing fan 2 x 17":                  {failingFan(2), nestedA(17)},
		"hostile 64 x 4 (refused)":            {recursiveFan(64), nestedA(4)},
	}
	for name, c := range cases {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Validate([]byte(c[0]), []byte(c[1]))
			}
		})
	}
}

// FuzzEvaluationBudget checks the budget on recursive schemas of any fan-out
// and configs of any depth: the counted cost never falls as the config gets
// deeper, a refused pair stays refused one level deeper, and Validate
// refuses exactly the pairs whose count exceeds the budget.
func FuzzEvaluationBudget(f *testing.F) {
	f.Add(uint8(64), uint8(4), false)
	f.Add(uint8(2), uint8(16), true)
	f.Add(uint8(8), uint8(5), true)
	f.Fuzz(func(t *testing.T, branches, levels uint8, failing bool) {
		b, l := int(branches%80)+1, int(levels%40)
		schema := recursiveFan(b)
		if failing {
			schema = failingFan(b)
		}
		compiled, err := compileConfigSchema([]byte(schema), nil)
		if err != nil {
			return // the schema-only bound refused it
		}
		costAt := func(levels int) int {
			cfg, err := decodeConfig([]byte(nestedA(levels)))
			if err != nil {
				t.Fatal(err)
			}
			return evaluationCost(compiled, cfg)
		}
		here, deeper := costAt(l), costAt(l+1)
		if deeper < here {
			t.Fatalf("%d branches: cost %d at %d levels but %d at %d", b, here, l, deeper, l+1)
		}
		err = Validate([]byte(schema), []byte(nestedA(l)))
		refused := errors.Is(err, ErrInvalidSchema) && strings.Contains(err.Error(), "would take more than")
		if refused != (here > maxEvaluationCost) {
			t.Fatalf("%d branches, %d levels: cost %d, budget %d, but Validate said %v", b, l, here, maxEvaluationCost, err)
		}
	})
}
