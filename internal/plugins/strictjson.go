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

// strictDecode decodes exactly one JSON document into v, more strictly than
// encoding/json does on its own, because the files it reads (the catalog, the
// owner's signers, the signed manifest label) decide what may run (D-42, D-45,
// D-57) and must mean one thing to every reader:
//
//   - the input must be valid UTF-8 (encoding/json would silently replace
//     bad bytes with U+FFFD);
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
	if path, err := walkStrict(dec, reflect.TypeOf(v), ""); err != nil {
		return path, err
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

// walkStrict reads one JSON value from dec, checking the rules strictDecode
// lists against the Go type t the value will decode into (nil when any value
// is fine, as inside a json.RawMessage).
func walkStrict(dec *json.Decoder, t reflect.Type, path string) (string, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		t = nil
	}
	tok, err := dec.Token()
	if err != nil {
		return path, syntaxDetail(err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return "", nil
	}
	switch delim {
	case '{':
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
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return path, syntaxDetail(err)
			}
			key, _ := kt.(string)
			if seen[key] {
				return path, fmt.Errorf("key %q repeated", key)
			}
			seen[key] = true
			child := joinPath(path, key)
			ct := elem
			if fields != nil {
				ft, known := fields[key]
				if !known {
					return path, fmt.Errorf("unknown field %q", key)
				}
				ct = ft
			}
			if p, err := walkStrict(dec, ct, child); err != nil {
				return p, err
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if p, err := walkStrict(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return p, err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return path, syntaxDetail(err)
	}
	return "", nil
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
	}
	return "value of the right type"
}
