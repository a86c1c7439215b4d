package cosign

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// inTotoStatementType is the only statement type an attestation may have.
const inTotoStatementType = "https://in-toto.io/Statement/v1"

// ErrMalformedStatement is why an attestation whose bundle verified is
// skipped when its in-toto statement is not one this package accepts: not
// strict in-toto v1 JSON, more or other subjects than exactly the image's
// digest, or a predicate that is not one JSON object.
var ErrMalformedStatement = errors.New("malformed in-toto statement")

// statementJSON is an in-toto v1 statement, field for field; any other
// field is refused.
type statementJSON struct {
	Type          string          `json:"_type"`
	Subject       []subjectJSON   `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

type subjectJSON struct {
	Name   string            `json:"name,omitempty"`
	Digest map[string]string `json:"digest"`
}

// ParseStatement reads raw, a signed in-toto statement, strictly and
// returns its predicate: raw is at most MaxBundleBytes of one JSON object
// with no unknown field and no repeated key, of type in-toto Statement v1,
// whose one subject's digest is exactly {"sha256": <digest's hex>}, whose
// predicateType is predicateType and whose predicate is a JSON object.
// digest is "sha256:<64 lowercase hex>". Errors wrap ErrMalformedStatement,
// or ErrPredicateType for a statement of another type.
func ParseStatement(raw []byte, digest, predicateType string) (json.RawMessage, error) {
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if b, err := hex.DecodeString(hexDigest); !ok || err != nil || len(b) != 32 || strings.ToLower(hexDigest) != hexDigest {
		return nil, fmt.Errorf("digest %q is not sha256:<64 lowercase hex>", digest)
	}
	if len(raw) > MaxBundleBytes {
		return nil, fmt.Errorf("%w: %d bytes, over the %d-byte cap", ErrMalformedStatement, len(raw), MaxBundleBytes)
	}
	if err := noRepeatedKeys(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedStatement, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var st statementJSON
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedStatement, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the statement", ErrMalformedStatement)
	}
	if st.Type != inTotoStatementType {
		return nil, fmt.Errorf("%w: _type %.80q, want %s", ErrMalformedStatement, st.Type, inTotoStatementType)
	}
	if st.PredicateType != predicateType {
		return nil, fmt.Errorf("%w: predicate type %.200q, want %q", ErrPredicateType, st.PredicateType, predicateType)
	}
	if len(st.Subject) != 1 {
		return nil, fmt.Errorf("%w: %d subjects, want exactly the image's digest", ErrMalformedStatement, len(st.Subject))
	}
	if d := st.Subject[0].Digest; len(d) != 1 || d["sha256"] != hexDigest {
		return nil, fmt.Errorf("%w: the subject is not exactly the image's digest %s", ErrMalformedStatement, digest)
	}
	pred := bytes.TrimSpace(st.Predicate)
	if len(pred) == 0 || pred[0] != '{' {
		return nil, fmt.Errorf("%w: the predicate is not a JSON object", ErrMalformedStatement)
	}
	return json.RawMessage(bytes.Clone(pred)), nil
}

// noRepeatedKeys refuses JSON in which an object names a key twice: two
// readers of it could see two different statements.
func noRepeatedKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// Each open object's keys seen so far; nil for an array.
	var stack []map[string]bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, map[string]bool{})
				expectKey = true
				continue
			case '[':
				stack = append(stack, nil)
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if expectKey {
				top := stack[len(stack)-1]
				if top[t] {
					return fmt.Errorf("key %.80q repeated", t)
				}
				top[t] = true
				expectKey = false
				continue
			}
		}
		// After a value inside an object the next token is a key.
		expectKey = len(stack) > 0 && stack[len(stack)-1] != nil
	}
}
