// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"errors"
	"fmt"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// FieldError is one field of a Delivery that breaks the contract's
// conventions, named by its path such as "transactions[2].postings[0].amount".
type FieldError struct {
	// Field is the path of the field in the Delivery.
	Field string
	// Err says which rule the field breaks.
	Err error
}

// Error names the field and the rule it breaks.
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the rule's error, for errors.Is.
func (e *FieldError) Unwrap() error { return e.Err }

// The rules Validate checks; each FieldError wraps one of them.
var (
	// ErrRequired means a field that must be set is empty.
	ErrRequired = errors.New("required")
	// ErrNotDate means a date is not a real YYYY-MM-DD date.
	ErrNotDate = errors.New("not a YYYY-MM-DD date")
	// ErrNotCurrency means a currency is not three upper-case letters.
	ErrNotCurrency = errors.New("not an ISO 4217 currency code")
	// ErrDuplicate means a transaction's source_id appears twice.
	ErrDuplicate = errors.New("appears more than once")
	// ErrInstrumentQuantity means an instrument and a quantity are not set
	// together.
	ErrInstrumentQuantity = errors.New("instrument and quantity must be set together")
	// ErrNotPositive means a rate or price is zero or negative.
	ErrNotPositive = errors.New("must be positive")
	// ErrUnknownEnum means an enum field holds an unspecified or unknown
	// value.
	ErrUnknownEnum = errors.New("unspecified or unknown value")
)

// checker collects every FieldError of one Delivery.
type checker struct{ errs []error }

func (c *checker) add(field string, err error) {
	c.errs = append(c.errs, &FieldError{Field: field, Err: err})
}

func (c *checker) required(field, v string) bool {
	if v == "" {
		c.add(field, ErrRequired)
		return false
	}
	return true
}

func (c *checker) date(field, v string) {
	if c.required(field, v) && !IsDate(v) {
		c.add(field, ErrNotDate)
	}
}

func (c *checker) optionalDate(field, v string) {
	if v != "" && !IsDate(v) {
		c.add(field, ErrNotDate)
	}
}

func (c *checker) currency(field, v string) {
	if c.required(field, v) && !IsCurrency(v) {
		c.add(field, ErrNotCurrency)
	}
}

func (c *checker) optionalCurrency(field, v string) {
	if v != "" && !IsCurrency(v) {
		c.add(field, ErrNotCurrency)
	}
}

func (c *checker) decimal(field, v string) {
	if c.required(field, v) && !IsDecimal(v) {
		c.add(field, ErrNotDecimal)
	}
}

func (c *checker) positive(field, v string) {
	if !c.required(field, v) {
		return
	}
	d, err := ParseDecimal(v)
	switch {
	case err != nil:
		c.add(field, ErrNotDecimal)
	case d.Sign() <= 0:
		c.add(field, ErrNotPositive)
	}
}

func (c *checker) instrument(field string, in *connectorv1.Instrument) {
	if in.GetIsin() == "" && in.GetSymbol() == "" {
		c.add(field, fmt.Errorf("%w: isin or symbol", ErrRequired))
	}
	if isin := in.GetIsin(); isin != "" && !isISINShape(isin) {
		c.add(field+".isin", errors.New("not an ISIN: two letters, nine letters or digits, a digit"))
	}
	c.optionalCurrency(field+".currency", in.GetCurrency())
}

// holding checks an instrument and quantity that must be set together.
func (c *checker) holding(field string, in *connectorv1.Instrument, quantity string) {
	switch {
	case in == nil && quantity == "":
	case in == nil || quantity == "":
		c.add(field, ErrInstrumentQuantity)
	default:
		c.instrument(field+".instrument", in)
		c.decimal(field+".quantity", quantity)
	}
}

func isISINShape(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := 0; i < 12; i++ {
		c := s[i]
		letter, digit := c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
		switch {
		case i < 2 && !letter, i == 11 && !digit, !letter && !digit:
			return false
		}
	}
	return true
}

// Validate checks every field of d against the contract's conventions
// and returns every problem at once, joined, each a *FieldError
// naming its field: decimals, YYYY-MM-DD dates, ISO 4217 codes, required
// IDs, unique transaction source IDs, and instruments set together with
// quantities. It does not check that postings balance; Builder reports that
// as an ingest problem.
func Validate(d *connectorv1.Delivery) error {
	var c checker
	c.required("batch_id", d.GetBatchId())
	if d.GetInstitution() == nil {
		c.add("institution", ErrRequired)
	} else {
		c.required("institution.id", d.GetInstitution().GetId())
	}
	seen := make(map[string]bool)
	for i, t := range d.GetTransactions() {
		f := fmt.Sprintf("transactions[%d]", i)
		if c.required(f+".source_id", t.GetSourceId()) {
			if seen[t.GetSourceId()] {
				c.add(f+".source_id", ErrDuplicate)
			}
			seen[t.GetSourceId()] = true
		}
		c.date(f+".date", t.GetDate())
		c.optionalDate(f+".value_date", t.GetValueDate())
		if len(t.GetPostings()) == 0 {
			c.add(f+".postings", ErrRequired)
		}
		for j, p := range t.GetPostings() {
			pf := fmt.Sprintf("%s.postings[%d]", f, j)
			c.required(pf+".account_id", p.GetAccountId())
			c.decimal(pf+".amount", p.GetAmount())
			c.currency(pf+".currency", p.GetCurrency())
			c.holding(pf, p.GetInstrument(), p.GetQuantity())
		}
	}
	for i, b := range d.GetBalanceAssertions() {
		f := fmt.Sprintf("balance_assertions[%d]", i)
		c.required(f+".account_id", b.GetAccountId())
		c.date(f+".date", b.GetDate())
		c.holding(f, b.GetInstrument(), b.GetQuantity())
		if b.GetInstrument() == nil || b.GetAmount() != "" {
			c.decimal(f+".amount", b.GetAmount())
			c.currency(f+".currency", b.GetCurrency())
		}
	}
	for i, p := range d.GetProblems() {
		f := fmt.Sprintf("problems[%d]", i)
		if _, ok := connectorv1.Severity_name[int32(p.GetSeverity())]; !ok || p.GetSeverity() == connectorv1.Severity_SEVERITY_UNSPECIFIED {
			c.add(f+".severity", ErrUnknownEnum)
		}
		c.required(f+".code", p.GetCode())
		c.required(f+".message", p.GetMessage())
	}
	for i, p := range d.GetPrices() {
		f := fmt.Sprintf("prices[%d]", i)
		if p.GetInstrument() == nil {
			c.add(f+".instrument", ErrRequired)
		} else {
			c.instrument(f+".instrument", p.GetInstrument())
		}
		c.date(f+".date", p.GetDate())
		c.decimal(f+".price", p.GetPrice())
		c.currency(f+".currency", p.GetCurrency())
	}
	for i, r := range d.GetFxRates() {
		f := fmt.Sprintf("fx_rates[%d]", i)
		c.date(f+".date", r.GetDate())
		c.currency(f+".base_currency", r.GetBaseCurrency())
		c.currency(f+".quote_currency", r.GetQuoteCurrency())
		if r.GetBaseCurrency() != "" && r.GetBaseCurrency() == r.GetQuoteCurrency() {
			c.add(f+".quote_currency", errors.New("equals base_currency"))
		}
		c.positive(f+".rate", r.GetRate())
	}
	for i, r := range d.GetIndexReadings() {
		f := fmt.Sprintf("index_readings[%d]", i)
		c.required(f+".index_id", r.GetIndexId())
		c.date(f+".date", r.GetDate())
		c.decimal(f+".value", r.GetValue())
	}
	return errors.Join(c.errs...)
}
