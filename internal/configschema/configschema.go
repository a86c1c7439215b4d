package configschema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Errors of Validate. Every error it returns wraps exactly one of
// ErrInvalidConfig and ErrInvalidSchema; a refused reference also wraps
// ErrSchemaRefRefused.
var (
	// ErrInvalidConfig: the config is not a JSON object, or does not match
	// the manifest's config schema (D-11).
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidSchema: the manifest's config schema is not a JSON Schema the
	// operator can compile.
	ErrInvalidSchema = errors.New("invalid config schema")
	// ErrSchemaRefRefused: the schema refers ($ref, $schema, ...) to a
	// document that is neither the schema itself nor a standard meta-schema.
	ErrSchemaRefRefused = errors.New("reference outside the schema refused")
)

const (
	// maxSchemaBytes bounds the schema Validate compiles: the schema
	// travels in the signed manifest label, which is bounded the same way.
	maxSchemaBytes = 256 << 10
	// maxSchemaDepth bounds the schema's JSON nesting: compiling takes time
	// cubic in it.
	maxSchemaDepth = 100
	// maxSchemaCost bounds how many subschemas one config value can be
	// checked against: references let a small schema unfold exponentially.
	maxSchemaCost = 1 << 16
	// maxConfigProblems is how many problems an ErrInvalidConfig names.
	maxConfigProblems = 8
	// maxPointerLen bounds the JSON pointer a problem names.
	maxPointerLen = 64
	// maxProblemLen bounds one problem's text, so a status message stays short.
	maxProblemLen = 160
	// schemaURL names the schema while it compiles. The .invalid domain never
	// resolves, and no loader would fetch it anyway: a relative $ref resolves
	// against it and is refused like any other document.
	schemaURL = "https://config-schema.openfief.invalid/schema.json"
)

// configPrinter renders the library's messages in English.
var configPrinter = message.NewPrinter(language.English)

// Validate checks a plugin's config against its manifest's JSON Schema
// (D-11). A missing or empty config is {}; the config must be a JSON object.
// An empty schema means the manifest has none, and any object is accepted.
// Schemas without $schema are read as draft 2020-12.
//
// The schema can't make the operator read a file or reach the network: its
// compiler resolves references only inside the schema itself and to the
// standard meta-schemas embedded in the library, and refuses every other
// document with ErrSchemaRefRefused. A schema longer than 256 KiB, nested
// deeper than 100 levels, unfolding through its references to more than
// 65536 subschemas, or whose check of this config would cost more than
// maxEvaluationCost steps (counted before the library runs), is refused as
// ErrInvalidSchema, so a Plugin's schema can't stall the operator.
//
// Errors are short and deterministic: up to eight problems, each naming the
// config's JSON pointer and the rule, never the offending value.
//
// A schema is compiled once: the result, refusals included, is kept by the
// SHA-256 of its bytes for the last 256 distinct schemas.
func Validate(schema, config json.RawMessage) error {
	return validateConfig(schema, config, nil)
}

// validateConfig is Validate telling observe, if not nil, each document
// outside the schema the compiler asked for and was refused.
func validateConfig(schema, config []byte, observe func(url string)) error {
	cfg, err := decodeConfig(config)
	if err != nil {
		return err
	}
	schema = bytes.TrimSpace(schema)
	if len(schema) == 0 {
		return nil
	}
	var compiled *jsonschema.Schema
	if observe == nil {
		compiled, err = compileCached(schema)
	} else {
		// The tests that observe refused documents need the compiler to run.
		compiled, err = compileConfigSchema(schema, observe)
	}
	if err != nil {
		return err
	}
	if evaluationCost(compiled, cfg) > maxEvaluationCost {
		return fmt.Errorf("%w: checking the config against it would take more than %d steps; "+
			"its references branch back into themselves at every level of the config", ErrInvalidSchema, maxEvaluationCost)
	}
	if err := compiled.Validate(cfg); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			if hasRefCycle(verr) {
				// A cycle shows only once a value reaches it, but it is the
				// schema's fault.
				return fmt.Errorf("%w: %s", ErrInvalidSchema, configProblems(verr))
			}
			return fmt.Errorf("%w: %s", ErrInvalidConfig, configProblems(verr))
		}
		return fmt.Errorf("%w: %s", ErrInvalidConfig, truncateProblem(err.Error(), maxProblemLen))
	}
	return nil
}

// decodeConfig reads the config as one JSON object, {} when empty.
func decodeConfig(config []byte) (any, error) {
	config = bytes.TrimSpace(config)
	if len(config) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeJSONValue(config)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%w: must be a JSON object", ErrInvalidConfig)
	}
	return v, nil
}

// compileConfigSchema compiles one schema document with references confined to it.
func compileConfigSchema(schema []byte, observe func(url string)) (*jsonschema.Schema, error) {
	if len(schema) > maxSchemaBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidSchema, maxSchemaBytes)
	}
	doc, err := decodeJSONValue(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("%w: must be a JSON object or a boolean", ErrInvalidSchema)
	}
	if jsonDepth(doc, maxSchemaDepth+1) > maxSchemaDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d levels", ErrInvalidSchema, maxSchemaDepth)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{observe: observe})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSchema, truncateProblem(err.Error(), maxProblemLen))
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		var lerr *jsonschema.LoadURLError
		if errors.As(err, &lerr) {
			return nil, fmt.Errorf("%w: %w: %s", ErrInvalidSchema, ErrSchemaRefRefused, strconv.Quote(truncateProblem(lerr.URL, maxProblemLen)))
		}
		var verr *jsonschema.SchemaValidationError
		if errors.As(err, &verr) {
			if cause, ok := verr.Err.(*jsonschema.ValidationError); ok {
				return nil, fmt.Errorf("%w: %s", ErrInvalidSchema, configProblems(cause))
			}
		}
		return nil, fmt.Errorf("%w: %s", ErrInvalidSchema, truncateProblem(err.Error(), maxProblemLen))
	}
	if cost := schemaCost(compiled, map[*jsonschema.Schema]int{}, map[*jsonschema.Schema]bool{}); cost > maxSchemaCost {
		return nil, fmt.Errorf("%w: unfolds to more than %d subschemas", ErrInvalidSchema, maxSchemaCost)
	}
	return compiled, nil
}

// schemaCost is how many subschemas s unfolds to when its references are
// followed, saturating just above maxSchemaCost. A reference back to a schema
// being unfolded counts once: it recurses into the config's own nesting, or
// the library refuses it as a cycle.
func schemaCost(s *jsonschema.Schema, memo map[*jsonschema.Schema]int, active map[*jsonschema.Schema]bool) int {
	if s == nil {
		return 0
	}
	if c, ok := memo[s]; ok {
		return c
	}
	if active[s] {
		return 1
	}
	active[s] = true
	cost := 1
	for _, sub := range subschemas(s) {
		cost = min(cost+schemaCost(sub, memo, active), maxSchemaCost+1)
	}
	delete(active, s)
	memo[s] = cost
	return cost
}

// subschemas lists every schema s applies to a value or its members.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	subs := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	if s.DynamicRef != nil {
		subs = append(subs, s.DynamicRef.Ref)
	}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	subs = append(subs, s.PrefixItems...)
	for _, sub := range s.Properties {
		subs = append(subs, sub)
	}
	for _, sub := range s.PatternProperties {
		subs = append(subs, sub)
	}
	for _, sub := range s.DependentSchemas {
		subs = append(subs, sub)
	}
	for _, v := range s.Dependencies {
		subs = appendSchema(subs, v)
	}
	subs = appendSchema(subs, s.AdditionalProperties)
	subs = appendSchema(subs, s.AdditionalItems)
	return appendSchema(subs, s.Items)
}

// appendSchema appends v's schemas, if v (a keyword that may also hold a
// bool or a string list) has any.
func appendSchema(subs []*jsonschema.Schema, v any) []*jsonschema.Schema {
	switch v := v.(type) {
	case *jsonschema.Schema:
		return append(subs, v)
	case []*jsonschema.Schema:
		return append(subs, v...)
	}
	return subs
}

// decodeJSONValue decodes exactly one JSON value with exact numbers, as the
// library's own loaders do, and refuses trailing data.
func decodeJSONValue(raw []byte) (any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %s", truncateProblem(err.Error(), maxProblemLen))
	}
	return v, nil
}

// jsonDepth is the nesting depth of a decoded JSON value (a scalar is 0),
// counted no further than limit.
func jsonDepth(v any, limit int) int {
	if limit <= 0 {
		return 0
	}
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, m := range v {
			deepest = max(deepest, jsonDepth(m, limit-1))
		}
	case []any:
		for _, m := range v {
			deepest = max(deepest, jsonDepth(m, limit-1))
		}
	default:
		return 0
	}
	return deepest + 1
}

// refusingLoader is the only loader Validate's compiler has: it refuses
// every document. The standard meta-schemas never reach it, because the
// library serves them from its embedded copies before asking a loader.
type refusingLoader struct {
	// observe, if not nil, is told each refused URL (for tests).
	observe func(url string)
}

// Load refuses url.
func (l refusingLoader) Load(url string) (any, error) {
	if l.observe != nil {
		l.observe(url)
	}
	return nil, ErrSchemaRefRefused
}

// configProblems renders a validation error as its leaf problems, "at <pointer>:
// <rule>", sorted, de-duplicated and capped.
func configProblems(e *jsonschema.ValidationError) string {
	var problems []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			at := strconv.Quote(truncateProblem(instancePointer(e.InstanceLocation), maxPointerLen))
			problems = append(problems, "at "+at+": "+truncateProblem(problemRule(e.ErrorKind), maxProblemLen))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	slices.SortFunc(problems, func(a, b string) int { return cmp.Compare(a, b) })
	problems = slices.Compact(problems)
	if len(problems) == 0 {
		return "does not match the schema"
	}
	more := len(problems) - maxConfigProblems
	if more > 0 {
		problems = append(problems[:maxConfigProblems], fmt.Sprintf("and %d more", more))
	}
	return strings.Join(problems, "; ")
}

// hasRefCycle reports whether a problem is a reference cycle in the schema.
func hasRefCycle(e *jsonschema.ValidationError) bool {
	if _, ok := e.ErrorKind.(*kind.RefCycle); ok {
		return true
	}
	return slices.ContainsFunc(e.Causes, hasRefCycle)
}

// problemRule is the library's message for a problem, except for the kinds whose
// message quotes the config's value: those name only the rule.
func problemRule(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return "does not match pattern " + strconv.Quote(k.Want)
	case *kind.Format:
		return "is not a valid " + strconv.Quote(k.Want)
	case *kind.ContentEncoding:
		return "is not " + strconv.Quote(k.Want) + " encoded"
	case *kind.ContentMediaType:
		return "is not of media type " + strconv.Quote(k.Want)
	case nil:
		return "does not match the schema"
	}
	return k.LocalizedString(configPrinter)
}

// instancePointer renders an instance location as a JSON pointer ("" is the root).
func instancePointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return b.String()
}

// truncateProblem cuts s to at most n bytes on a rune boundary, marking the cut.
func truncateProblem(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
