package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// MaxJSONDepth is how deeply the objects and arrays of a document the domain
// decodes strictly (a manifest label, the catalog, the owner's signers, the
// signing keys) may nest. The deepest legitimate document, a manifest whose
// config schema nests properties in properties, stays far below it; a
// hostile label of a few kilobytes that nests tens of thousands of levels is
// refused after reading MaxJSONDepth of them, so the work and memory spent
// on any document are linear in its size.
const MaxJSONDepth = 64

// strictDecode decodes exactly one JSON document into v, more strictly than
// encoding/json does on its own, because the files it reads (the catalog, the
// owner's signers, the signed manifest label) decide what may run (D-42, D-45,
// D-57) and must mean one thing to every reader:
//
//   - the input must be valid UTF-8 (encoding/json would silently replace
//     bad bytes with U+FFFD);
//   - objects and arrays nest at most MaxJSONDepth levels;
//   - an object may not repeat a key (encoding/json keeps the last one);
//   - an object decoded into a struct may hold only that struct's JSON names,
//     spelt exactly (encoding/json also accepts "Name" or "NAME" for "name");
//   - nothing may follow the document.
//
// On failure it returns the dotted path of the offending value ("" for the
// document itself) and what was wrong.
func strictDecode(raw []byte, v any) (string, error) {
	if !utf8.Valid(raw) {
		return "", errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	w := strictWalker{dec: dec}
	if err := w.walk(reflect.TypeOf(v)); err != nil {
		return w.errPath, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("trailing data after the JSON document")
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return te.Field, fmt.Errorf("%s is not a JSON %s", describeJSONValue(te.Value), jsonKind(te.Type))
		}
		return "", err
	}
	return "", nil
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// pathStep is one step from the document to a value: an object key, or an
// array index when isIndex is set.
type pathStep struct {
	key     string
	index   int
	isIndex bool
}

// strictWalker reads a document token by token, checking the rules
// strictDecode lists. It keeps the way to the current value as a stack of
// steps, at most MaxJSONDepth long, and spells it out as a string only for
// the error it returns: building a path string per level would cost memory
// quadratic in the depth.
type strictWalker struct {
	dec     *json.Decoder
	steps   []pathStep
	errPath string
}

// fail records where the walk stopped and returns err.
func (w *strictWalker) fail(err error) error {
	var b strings.Builder
	for _, s := range w.steps {
		switch {
		case s.isIndex:
			fmt.Fprintf(&b, "[%d]", s.index)
		case b.Len() > 0:
			b.WriteByte('.')
			b.WriteString(s.key)
		default:
			b.WriteString(s.key)
		}
	}
	w.errPath = b.String()
	return err
}

// walk reads one JSON value, checking it against the Go type t it will
// decode into (nil when any value is fine, as inside a json.RawMessage).
func (w *strictWalker) walk(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		t = nil
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.fail(syntaxDetail(err))
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if len(w.steps) >= MaxJSONDepth {
		return w.fail(fmt.Errorf("nested deeper than %d levels", MaxJSONDepth))
	}
	switch delim {
	case '{':
		if err := w.walkObject(t); err != nil {
			return err
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			w.steps = append(w.steps, pathStep{index: i, isIndex: true})
			if err := w.walk(elem); err != nil {
				return err
			}
			w.steps = w.steps[:len(w.steps)-1]
		}
	}
	if _, err := w.dec.Token(); err != nil { // the closing delimiter
		return w.fail(syntaxDetail(err))
	}
	return nil
}

// walkObject reads the members of an object whose '{' was just read.
func (w *strictWalker) walkObject(t reflect.Type) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = jsonFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for w.dec.More() {
		kt, err := w.dec.Token()
		if err != nil {
			return w.fail(syntaxDetail(err))
		}
		key, _ := kt.(string)
		if seen[key] {
			return w.fail(fmt.Errorf("key %q repeated", key))
		}
		seen[key] = true
		ct := elem
		if fields != nil {
			ft, known := fields[key]
			if !known {
				return w.fail(fmt.Errorf("unknown field %q", key))
			}
			ct = ft
		}
		w.steps = append(w.steps, pathStep{key: key})
		if err := w.walk(ct); err != nil {
			return err
		}
		w.steps = w.steps[:len(w.steps)-1]
	}
	return nil
}

// jsonFields maps the exact JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func syntaxDetail(err error) error {
	if err == io.EOF {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("not JSON: %v", err)
}

func describeJSONValue(v string) string {
	switch v {
	case "":
		return "the value"
	case "object", "array", "string", "number", "bool":
		return "a JSON " + v
	}
	return v
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	}
	return "value of the right type"
}
