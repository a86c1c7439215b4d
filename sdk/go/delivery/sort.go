// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"cmp"
	"slices"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Sort puts d's lists in a fixed order, so the same report always gives the
// same Delivery whatever order a connector found things in:
// transactions by date and source ID; balance assertions by date, account,
// currency and instrument; prices by date, instrument and currency; FX rates
// by date and currency pair; index readings by index and date. Postings keep
// their order within a transaction, and problems the order they were
// reported in. Ties keep their order.
func Sort(d *connectorv1.Delivery) {
	slices.SortStableFunc(d.Transactions, func(a, b *connectorv1.Transaction) int {
		return cmp.Or(cmp.Compare(a.GetDate(), b.GetDate()), cmp.Compare(a.GetSourceId(), b.GetSourceId()))
	})
	slices.SortStableFunc(d.BalanceAssertions, func(a, b *connectorv1.BalanceAssertion) int {
		return cmp.Or(
			cmp.Compare(a.GetDate(), b.GetDate()),
			cmp.Compare(a.GetAccountId(), b.GetAccountId()),
			cmp.Compare(a.GetCurrency(), b.GetCurrency()),
			compareInstruments(a.GetInstrument(), b.GetInstrument()),
		)
	})
	slices.SortStableFunc(d.Prices, func(a, b *connectorv1.Price) int {
		return cmp.Or(
			cmp.Compare(a.GetDate(), b.GetDate()),
			compareInstruments(a.GetInstrument(), b.GetInstrument()),
			cmp.Compare(a.GetCurrency(), b.GetCurrency()),
		)
	})
	slices.SortStableFunc(d.FxRates, func(a, b *connectorv1.FxRate) int {
		return cmp.Or(
			cmp.Compare(a.GetDate(), b.GetDate()),
			cmp.Compare(a.GetBaseCurrency(), b.GetBaseCurrency()),
			cmp.Compare(a.GetQuoteCurrency(), b.GetQuoteCurrency()),
		)
	})
	slices.SortStableFunc(d.IndexReadings, func(a, b *connectorv1.IndexReading) int {
		return cmp.Or(cmp.Compare(a.GetIndexId(), b.GetIndexId()), cmp.Compare(a.GetDate(), b.GetDate()))
	})
}

func compareInstruments(a, b *connectorv1.Instrument) int {
	return cmp.Or(
		cmp.Compare(a.GetIsin(), b.GetIsin()),
		cmp.Compare(a.GetSymbol(), b.GetSymbol()),
		cmp.Compare(a.GetExchange(), b.GetExchange()),
	)
}
