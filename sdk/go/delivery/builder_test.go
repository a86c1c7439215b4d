// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

var nbp = &connectorv1.Institution{Id: "nbp", Name: "Narodowy Bank Polski"}

// vwce returns a new Instrument each time, so a test may edit it.
func vwce() *connectorv1.Instrument {
	return &connectorv1.Instrument{Isin: "IE00BK5BQT80", Symbol: "VWCE", Currency: "EUR"}
}

func cash(account, amount, currency string) *connectorv1.Posting {
	return &connectorv1.Posting{AccountId: account, Amount: amount, Currency: currency}
}

func validDelivery() *connectorv1.Delivery {
	return &connectorv1.Delivery{
		BatchId:     "b-1",
		Institution: nbp,
		Transactions: []*connectorv1.Transaction{{
			SourceId: "t-1", Date: "2026-03-30", ValueDate: "2026-04-01",
			Postings: []*connectorv1.Posting{
				cash("broker", "-1000.10", "EUR"),
				{AccountId: "vwce", Amount: "1000.10", Currency: "EUR", Instrument: vwce(), Quantity: "8.5"},
			},
		}},
		BalanceAssertions: []*connectorv1.BalanceAssertion{
			{AccountId: "broker", Date: "2026-03-30", Amount: "0.30", Currency: "EUR"},
			{AccountId: "vwce", Date: "2026-03-30", Instrument: vwce(), Quantity: "8.5"},
		},
		Problems:      []*connectorv1.IngestProblem{{Severity: connectorv1.Severity_SEVERITY_WARNING, Code: "c", Message: "m"}},
		Prices:        []*connectorv1.Price{{Instrument: vwce(), Date: "2026-03-30", Price: "117.66", Currency: "EUR"}},
		FxRates:       []*connectorv1.FxRate{{Date: "2026-03-30", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2843"}},
		IndexReadings: []*connectorv1.IndexReading{{IndexId: "gus.cpi", Date: "2026-02-01", Value: "-0.4"}},
	}
}

func TestValidateAcceptsAValidDelivery(t *testing.T) {
	if err := Validate(validDelivery()); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesEveryBrokenField(t *testing.T) {
	tests := map[string]struct {
		edit  func(d *connectorv1.Delivery)
		field string
		rule  error
	}{
		"no batch ID":                 {func(d *connectorv1.Delivery) { d.BatchId = "" }, "batch_id", ErrRequired},
		"no institution":              {func(d *connectorv1.Delivery) { d.Institution = nil }, "institution", ErrRequired},
		"float amount":                {func(d *connectorv1.Delivery) { d.Transactions[0].Postings[0].Amount = "1e3" }, "transactions[0].postings[0].amount", ErrNotDecimal},
		"comma amount":                {func(d *connectorv1.Delivery) { d.Transactions[0].Postings[0].Amount = "1,5" }, "transactions[0].postings[0].amount", ErrNotDecimal},
		"lower-case currency":         {func(d *connectorv1.Delivery) { d.Transactions[0].Postings[0].Currency = "eur" }, "transactions[0].postings[0].currency", ErrNotCurrency},
		"bad date":                    {func(d *connectorv1.Delivery) { d.Transactions[0].Date = "2026-02-29" }, "transactions[0].date", ErrNotDate},
		"timestamp date":              {func(d *connectorv1.Delivery) { d.Transactions[0].Date = "2026-03-30T00:00:00Z" }, "transactions[0].date", ErrNotDate},
		"bad value date":              {func(d *connectorv1.Delivery) { d.Transactions[0].ValueDate = "30.03.2026" }, "transactions[0].value_date", ErrNotDate},
		"no postings":                 {func(d *connectorv1.Delivery) { d.Transactions[0].Postings = nil }, "transactions[0].postings", ErrRequired},
		"no account":                  {func(d *connectorv1.Delivery) { d.Transactions[0].Postings[1].AccountId = "" }, "transactions[0].postings[1].account_id", ErrRequired},
		"quantity without instrument": {func(d *connectorv1.Delivery) { d.Transactions[0].Postings[1].Instrument = nil }, "transactions[0].postings[1]", ErrInstrumentQuantity},
		"duplicate source ID": {func(d *connectorv1.Delivery) {
			d.Transactions = append(d.Transactions, proto.Clone(d.Transactions[0]).(*connectorv1.Transaction))
		}, "transactions[1].source_id", ErrDuplicate},
		"position without quantity":     {func(d *connectorv1.Delivery) { d.BalanceAssertions[1].Quantity = "" }, "balance_assertions[1]", ErrInstrumentQuantity},
		"cash balance without currency": {func(d *connectorv1.Delivery) { d.BalanceAssertions[0].Currency = "" }, "balance_assertions[0].currency", ErrRequired},
		"unspecified severity":          {func(d *connectorv1.Delivery) { d.Problems[0].Severity = 0 }, "problems[0].severity", ErrUnknownEnum},
		"unknown severity":              {func(d *connectorv1.Delivery) { d.Problems[0].Severity = 7 }, "problems[0].severity", ErrUnknownEnum},
		"price without instrument":      {func(d *connectorv1.Delivery) { d.Prices[0].Instrument = nil }, "prices[0].instrument", ErrRequired},
		"instrument without id":         {func(d *connectorv1.Delivery) { d.Prices[0].Instrument = &connectorv1.Instrument{Name: "x"} }, "prices[0].instrument", ErrRequired},
		"zero rate":                     {func(d *connectorv1.Delivery) { d.FxRates[0].Rate = "0.0000" }, "fx_rates[0].rate", ErrNotPositive},
		"negative rate":                 {func(d *connectorv1.Delivery) { d.FxRates[0].Rate = "-4.2" }, "fx_rates[0].rate", ErrNotPositive},
		"float rate":                    {func(d *connectorv1.Delivery) { d.FxRates[0].Rate = "4.2843e0" }, "fx_rates[0].rate", ErrNotDecimal},
		"no index ID":                   {func(d *connectorv1.Delivery) { d.IndexReadings[0].IndexId = "" }, "index_readings[0].index_id", ErrRequired},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := validDelivery()
			tt.edit(d)
			err := Validate(d)
			var found bool
			for _, e := range unjoin(err) {
				var fe *FieldError
				if errors.As(e, &fe) && fe.Field == tt.field && errors.Is(fe, tt.rule) {
					found = true
				}
			}
			if !found {
				t.Fatalf("Validate = %v, want %s: %v", err, tt.field, tt.rule)
			}
		})
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	d := validDelivery()
	d.BatchId = ""
	d.FxRates[0].QuoteCurrency = "EUR"
	d.IndexReadings[0].Date = "2026-13-01"
	d.Prices[0].Instrument.Isin = "US-0378331005"
	if n := len(unjoin(Validate(d))); n != 4 {
		t.Fatalf("Validate found %d problems, want 4: %v", n, Validate(d))
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func TestIsDateAndCurrency(t *testing.T) {
	for s, want := range map[string]bool{
		"2026-03-31": true, "2024-02-29": true, "2026-02-29": false, "2026-3-31": false,
		"2026-03-31 ": false, "20260331": false, "": false, "+2026-03-31": false,
	} {
		if IsDate(s) != want {
			t.Errorf("IsDate(%q) = %v", s, !want)
		}
	}
	for s, want := range map[string]bool{"PLN": true, "XAU": true, "pln": false, "PL": false, "PLNX": false, "P1N": false, "ŁÓD": false} {
		if IsCurrency(s) != want {
			t.Errorf("IsCurrency(%q) = %v", s, !want)
		}
	}
	if got := Date(time.Date(2026, 3, 31, 23, 30, 0, 0, time.FixedZone("CEST", -2*3600))); got != "2026-04-01" {
		t.Errorf("Date = %s, want the UTC date 2026-04-01", got)
	}
}

func TestSortIsDeterministic(t *testing.T) {
	tx := func(date, id string) *connectorv1.Transaction {
		return &connectorv1.Transaction{SourceId: id, Date: date, Postings: []*connectorv1.Posting{cash("a", "1", "PLN"), cash("b", "-1", "PLN")}}
	}
	rate := func(date, base string) *connectorv1.FxRate {
		return &connectorv1.FxRate{Date: date, BaseCurrency: base, QuoteCurrency: "PLN", Rate: "1"}
	}
	build := func(order []int) *connectorv1.Delivery {
		txs := []*connectorv1.Transaction{tx("2026-03-02", "b"), tx("2026-03-01", "z"), tx("2026-03-02", "a")}
		rates := []*connectorv1.FxRate{rate("2026-03-02", "USD"), rate("2026-03-01", "USD"), rate("2026-03-02", "EUR")}
		d := &connectorv1.Delivery{}
		for _, i := range order {
			d.Transactions = append(d.Transactions, txs[i])
			d.FxRates = append(d.FxRates, rates[i])
		}
		Sort(d)
		return d
	}
	want := build([]int{0, 1, 2})
	var ids []string
	for _, t := range want.Transactions {
		ids = append(ids, t.Date+"/"+t.SourceId)
	}
	if !slices.Equal(ids, []string{"2026-03-01/z", "2026-03-02/a", "2026-03-02/b"}) {
		t.Fatalf("order %v", ids)
	}
	for _, order := range [][]int{{2, 1, 0}, {1, 0, 2}, {2, 0, 1}} {
		if got := build(order); !proto.Equal(got, want) {
			t.Fatalf("order %v sorted differently", order)
		}
	}
}

func TestBuilderReportsUnbalancedTransactions(t *testing.T) {
	b := NewBuilder("b-1", nbp)
	b.Transaction(&connectorv1.Transaction{SourceId: "ok", Date: "2026-03-01", Postings: []*connectorv1.Posting{
		cash("a", "0.1", "PLN"), cash("a", "0.2", "PLN"), cash("b", "-0.3", "PLN"),
	}})
	b.Transaction(&connectorv1.Transaction{SourceId: "off", Date: "2026-03-02", Postings: []*connectorv1.Posting{
		cash("a", "10.00", "USD"), cash("b", "-9.99", "USD"), cash("c", "5", "EUR"),
	}})
	b.Warn("rounded", "line 3", "amount %s rounded", "1.005")
	d, err := b.Build("2026-03-02")
	if err != nil {
		t.Fatal(err)
	}
	if d.GetWatermark() != "2026-03-02" || d.GetBatchId() != "b-1" {
		t.Fatalf("watermark %q batch %q", d.GetWatermark(), d.GetBatchId())
	}
	var unbalanced []string
	for _, p := range d.GetProblems() {
		if p.GetCode() == ProblemUnbalanced {
			if p.GetSeverity() != connectorv1.Severity_SEVERITY_ERROR {
				t.Fatalf("unbalanced problem has severity %v", p.GetSeverity())
			}
			unbalanced = append(unbalanced, p.GetSourceId()+": "+p.GetMessage())
		}
	}
	want := []string{"off: postings do not balance: 5 EUR, 0.01 USD"}
	if !slices.Equal(unbalanced, want) {
		t.Fatalf("unbalanced problems %q, want %q", unbalanced, want)
	}
	if d.GetProblems()[0].GetCode() != "rounded" || d.GetProblems()[0].GetLocation() != "line 3" || d.GetProblems()[0].GetMessage() != "amount 1.005 rounded" {
		t.Fatalf("warning %v", d.GetProblems()[0])
	}
}

func TestBuilderRefusesAnInvalidDelivery(t *testing.T) {
	b := NewBuilder("b-1", nbp)
	b.FxRate(&connectorv1.FxRate{Date: "2026-03-01", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.28"})
	b.Price(&connectorv1.Price{Instrument: vwce(), Date: "2026-03-01", Price: "117.5", Currency: "EUR"})
	b.IndexReading(&connectorv1.IndexReading{IndexId: "i", Date: "2026-03-01", Value: "1"})
	b.Balance(&connectorv1.BalanceAssertion{AccountId: "a", Date: "2026-03-01", Amount: "1", Currency: "PLN"})
	b.Error("unreadable_row", "line 9", "row %d unreadable", 9)
	if _, err := b.Build(""); err != nil {
		t.Fatalf("valid delivery refused: %v", err)
	}
	b = NewBuilder("b-1", nbp)
	b.FxRate(&connectorv1.FxRate{Date: "2026-03-01", BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4,28"})
	_, err := b.Build("")
	if err == nil || !strings.Contains(err.Error(), "fx_rates[0].rate") {
		t.Fatalf("Build = %v, want an error naming fx_rates[0].rate", err)
	}
}
