// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"fmt"
	"slices"
	"strings"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// ProblemUnbalanced is the code of the problem Build reports for a
// transaction whose postings do not add up to zero in some currency.
const ProblemUnbalanced = "unbalanced_transaction"

// Builder collects what a connector maps from one report and builds the
// Delivery: it reports problems, checks that every transaction's
// postings balance per currency, sorts, and validates every field. It is
// not safe for concurrent use.
type Builder struct {
	d *connectorv1.Delivery
}

// NewBuilder starts the Delivery answering the request with batchID, for
// institution.
func NewBuilder(batchID string, institution *connectorv1.Institution) *Builder {
	return &Builder{d: &connectorv1.Delivery{BatchId: batchID, Institution: institution}}
}

// Transaction adds a mapped transaction.
func (b *Builder) Transaction(t *connectorv1.Transaction) {
	b.d.Transactions = append(b.d.Transactions, t)
}

// Balance adds a balance the institution reported.
func (b *Builder) Balance(a *connectorv1.BalanceAssertion) {
	b.d.BalanceAssertions = append(b.d.BalanceAssertions, a)
}

// Price adds a quote of an instrument.
func (b *Builder) Price(p *connectorv1.Price) { b.d.Prices = append(b.d.Prices, p) }

// FxRate adds an exchange rate.
func (b *Builder) FxRate(r *connectorv1.FxRate) { b.d.FxRates = append(b.d.FxRates, r) }

// IndexReading adds a published index value.
func (b *Builder) IndexReading(r *connectorv1.IndexReading) {
	b.d.IndexReadings = append(b.d.IndexReadings, r)
}

// Warn reports something the owner should look at although nothing is
// missing from the delivery. location points into the report, such
// as "line 17", or is empty. Never put a credential in a problem.
func (b *Builder) Warn(code, location, format string, args ...any) {
	b.problem(connectorv1.Severity_SEVERITY_WARNING, code, "", location, fmt.Sprintf(format, args...))
}

// Error reports something the institution reported that is missing from
// the delivery, such as a row the connector could not read.
func (b *Builder) Error(code, location, format string, args ...any) {
	b.problem(connectorv1.Severity_SEVERITY_ERROR, code, "", location, fmt.Sprintf(format, args...))
}

// TransactionError reports a problem with the transaction sourceID, which
// the delivery still carries.
func (b *Builder) TransactionError(sourceID, code, format string, args ...any) {
	b.problem(connectorv1.Severity_SEVERITY_ERROR, code, sourceID, "", fmt.Sprintf(format, args...))
}

func (b *Builder) problem(sev connectorv1.Severity, code, sourceID, location, msg string) {
	b.d.Problems = append(b.d.Problems, &connectorv1.IngestProblem{
		Severity: sev, Code: code, Message: msg, SourceId: sourceID, Location: location,
	})
}

// Build finishes the Delivery with the watermark the core stores once it is
// imported. It reports an ERROR problem for every transaction whose
// postings do not add up to zero per currency, sorts the lists (Sort), and
// returns Validate's error when any field breaks the contract. The Builder
// must not be used afterwards.
func (b *Builder) Build(watermark string) (*connectorv1.Delivery, error) {
	d := b.d
	d.Watermark = watermark
	for _, t := range d.Transactions {
		if off := Imbalance(t); len(off) > 0 {
			b.TransactionError(t.GetSourceId(), ProblemUnbalanced, "postings do not balance: %s", strings.Join(off, ", "))
		}
	}
	Sort(d)
	if err := Validate(d); err != nil {
		return nil, err
	}
	return d, nil
}

// Imbalance returns, for each currency in which t's posting amounts do not
// add up to zero, the remainder written "<amount> <currency>", sorted by
// currency. Amounts that are not decimals are skipped; Validate
// reports them.
func Imbalance(t *connectorv1.Transaction) []string {
	sums := make(map[string]Decimal)
	for _, p := range t.GetPostings() {
		a, err := ParseDecimal(p.GetAmount())
		if err != nil {
			continue
		}
		sums[p.GetCurrency()] = sums[p.GetCurrency()].Add(a)
	}
	var off []string
	for cur, sum := range sums {
		if !sum.IsZero() {
			off = append(off, sum.String()+" "+cur)
		}
	}
	slices.SortFunc(off, func(a, b string) int {
		return strings.Compare(a[strings.LastIndexByte(a, ' '):], b[strings.LastIndexByte(b, ' '):])
	})
	return off
}
