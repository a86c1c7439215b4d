// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// The shared conformance vectors in sdk/testdata/conformance are read by the
// tests of both SDKs, Go and TypeScript, which must agree on every one: a
// change of a rule in one SDK fails the other's tests until both match.
const conformanceDir = "../../testdata/conformance"

func readVectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformanceDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestConformanceDecimals(t *testing.T) {
	var f struct {
		ParseDecimal []struct {
			In  string  `json:"in"`
			Out *string `json:"out"`
		} `json:"parse_decimal"`
		ParseNumber []struct {
			In  string  `json:"in"`
			Out *string `json:"out"`
		} `json:"parse_number"`
		Arithmetic []struct{ A, Op, B, Want string } `json:"arithmetic"`
		Compare    []struct {
			A, B string
			Want int
		} `json:"compare"`
	}
	readVectors(t, "decimals.json", &f)
	if len(f.ParseDecimal) == 0 || len(f.ParseNumber) == 0 || len(f.Arithmetic) == 0 || len(f.Compare) == 0 {
		t.Fatal("a list of decimals.json is empty")
	}
	for _, v := range f.ParseDecimal {
		d, err := ParseDecimal(v.In)
		switch {
		case v.Out == nil && err == nil:
			t.Errorf("ParseDecimal(%q) = %s, want an error", v.In, d)
		case v.Out == nil && !errors.Is(err, ErrNotDecimal):
			t.Errorf("ParseDecimal(%q): %v does not wrap ErrNotDecimal", v.In, err)
		case v.Out != nil && (err != nil || d.String() != *v.Out):
			t.Errorf("ParseDecimal(%q) = %s, %v; want %s", v.In, d, err, *v.Out)
		}
		if IsDecimal(v.In) != (v.Out != nil) {
			t.Errorf("IsDecimal(%q) = %v", v.In, !(v.Out != nil))
		}
	}
	for _, v := range f.ParseNumber {
		d, err := ParseNumber(v.In)
		switch {
		case v.Out == nil && err == nil:
			t.Errorf("ParseNumber(%q) = %s, want an error", v.In, d)
		case v.Out != nil && (err != nil || d.String() != *v.Out):
			t.Errorf("ParseNumber(%q) = %s, %v; want %s", v.In, d, err, *v.Out)
		}
	}
	for _, v := range f.Arithmetic {
		a, b := MustDecimal(v.A), MustDecimal(v.B)
		var got Decimal
		switch v.Op {
		case "+":
			got = a.Add(b)
		case "-":
			got = a.Sub(b)
		case "*":
			got = a.Mul(b)
		default:
			t.Fatalf("unknown op %q", v.Op)
		}
		if got.String() != v.Want {
			t.Errorf("%s %s %s = %s, want %s", v.A, v.Op, v.B, got, v.Want)
		}
	}
	for _, v := range f.Compare {
		if got := MustDecimal(v.A).Cmp(MustDecimal(v.B)); got != v.Want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", v.A, v.B, got, v.Want)
		}
	}
}

func TestConformanceFields(t *testing.T) {
	var f struct {
		Dates []struct {
			In    string `json:"in"`
			Valid bool   `json:"valid"`
		} `json:"dates"`
		Currencies []struct {
			In    string `json:"in"`
			Valid bool   `json:"valid"`
		} `json:"currencies"`
	}
	readVectors(t, "fields.json", &f)
	if len(f.Dates) == 0 || len(f.Currencies) == 0 {
		t.Fatal("a list of fields.json is empty")
	}
	for _, v := range f.Dates {
		if IsDate(v.In) != v.Valid {
			t.Errorf("IsDate(%q) = %v", v.In, !v.Valid)
		}
	}
	for _, v := range f.Currencies {
		if IsCurrency(v.In) != v.Valid {
			t.Errorf("IsCurrency(%q) = %v", v.In, !v.Valid)
		}
	}
}

// fieldRule names the rule a FieldError breaks, in the vectors' words.
func fieldRule(fe *FieldError) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{ErrRequired, "required"}, {ErrNotDate, "not_date"}, {ErrNotCurrency, "not_currency"},
		{ErrNotDecimal, "not_decimal"}, {ErrDuplicate, "duplicate"},
		{ErrInstrumentQuantity, "instrument_quantity"}, {ErrNotPositive, "not_positive"},
		{ErrUnknownEnum, "unknown_enum"},
	} {
		if errors.Is(fe, r.err) {
			return r.name
		}
	}
	switch fe.Err.Error() {
	case "not an ISIN: two letters, nine letters or digits, a digit":
		return "not_isin"
	case "equals base_currency":
		return "equals_base"
	}
	return "unknown: " + fe.Err.Error()
}

type fieldVector struct {
	Field string `json:"field"`
	Rule  string `json:"rule"`
}

func TestConformanceDeliveries(t *testing.T) {
	var f struct {
		Validate []struct {
			Name     string          `json:"name"`
			Delivery json.RawMessage `json:"delivery"`
			Errors   []fieldVector   `json:"errors"`
		} `json:"validate"`
		Imbalance []struct {
			Name        string          `json:"name"`
			Transaction json.RawMessage `json:"transaction"`
			Off         []string        `json:"off"`
		} `json:"imbalance"`
		Sort []struct {
			Name     string          `json:"name"`
			Delivery json.RawMessage `json:"delivery"`
			Sorted   json.RawMessage `json:"sorted"`
		} `json:"sort"`
	}
	readVectors(t, "deliveries.json", &f)
	if len(f.Validate) == 0 || len(f.Imbalance) == 0 || len(f.Sort) == 0 {
		t.Fatal("a list of deliveries.json is empty")
	}
	for _, v := range f.Validate {
		t.Run("validate/"+v.Name, func(t *testing.T) {
			var d connectorv1.Delivery
			if err := protojson.Unmarshal(v.Delivery, &d); err != nil {
				t.Fatal(err)
			}
			got := []fieldVector{}
			for _, e := range unjoin(Validate(&d)) {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("%v is not a FieldError", e)
				}
				got = append(got, fieldVector{Field: fe.Field, Rule: fieldRule(fe)})
			}
			if !slices.Equal(got, v.Errors) {
				t.Fatalf("Validate found\n%v\nwant\n%v", got, v.Errors)
			}
		})
	}
	for _, v := range f.Imbalance {
		t.Run("imbalance/"+v.Name, func(t *testing.T) {
			var tx connectorv1.Transaction
			if err := protojson.Unmarshal(v.Transaction, &tx); err != nil {
				t.Fatal(err)
			}
			if got := Imbalance(&tx); !slices.Equal(got, v.Off) && len(got)+len(v.Off) > 0 {
				t.Fatalf("Imbalance = %q, want %q", got, v.Off)
			}
		})
	}
	for _, v := range f.Sort {
		t.Run("sort/"+v.Name, func(t *testing.T) {
			var d, want connectorv1.Delivery
			if err := protojson.Unmarshal(v.Delivery, &d); err != nil {
				t.Fatal(err)
			}
			if err := protojson.Unmarshal(v.Sorted, &want); err != nil {
				t.Fatal(err)
			}
			Sort(&d)
			if !proto.Equal(&d, &want) {
				t.Fatalf("Sort gave\n%v\nwant\n%v", protojson.Format(&d), protojson.Format(&want))
			}
		})
	}
}
