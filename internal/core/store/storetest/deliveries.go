package storetest

import (
	"fmt"
	"time"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Sync is a valid Sync delivery of batch with transactions first..first+n-1
// (source IDs "tx-000042"), each with two balancing postings, one of them
// moving units of an instrument; plus one balance assertion, price, FX rate
// and index reading per transaction day, one warning, and watermark.
func Sync(batch string, first, n int, watermark string) *connectorv1.Delivery {
	d := &connectorv1.Delivery{
		BatchId:     batch,
		Institution: &connectorv1.Institution{Id: "testbank", Name: "Test Bank"},
		Watermark:   watermark,
	}
	days := map[string]bool{}
	for i := first; i < first+n; i++ {
		date := Day(i)
		d.Transactions = append(d.Transactions, &connectorv1.Transaction{
			SourceId:    SourceID(i),
			Date:        date,
			Description: fmt.Sprintf("transfer %d", i),
			Payee:       "Shop",
			Postings: []*connectorv1.Posting{
				{AccountId: "acct-checking", Amount: fmt.Sprintf("-%d.10", i), Currency: "PLN"},
				{
					AccountId: "acct-broker", Amount: fmt.Sprintf("%d.10", i), Currency: "PLN",
					Instrument: &connectorv1.Instrument{Isin: "IE00BK5BQT80", Symbol: "VWCE", Exchange: "XETR", Currency: "EUR"},
					Quantity:   "0.5", Memo: "buy",
				},
			},
		})
		if days[date] {
			continue
		}
		days[date] = true
		d.BalanceAssertions = append(d.BalanceAssertions, &connectorv1.BalanceAssertion{AccountId: "acct-checking", Date: date, Amount: "100.00", Currency: "PLN"})
		d.Prices = append(d.Prices, &connectorv1.Price{Instrument: &connectorv1.Instrument{Isin: "IE00BK5BQT80", Symbol: "VWCE"}, Date: date, Price: "123.4500", Currency: "EUR"})
		d.FxRates = append(d.FxRates, &connectorv1.FxRate{Date: date, BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2840", SourceRef: "062/A/NBP/2026"})
		d.IndexReadings = append(d.IndexReadings, &connectorv1.IndexReading{IndexId: "gus.cpi.yoy", Date: date, Value: "104.1"})
	}
	d.Problems = append(d.Problems, &connectorv1.IngestProblem{
		Severity: connectorv1.Severity_SEVERITY_WARNING, Code: "rounded", Message: "a value was rounded as the bank did",
	})
	return d
}

// SourceID is the source ID of transaction i in Sync's deliveries.
func SourceID(i int) string { return fmt.Sprintf("tx-%06d", i) }

// Day is the date of transaction i in Sync's deliveries: ten transactions a
// day from 2026-01-01.
func Day(i int) string {
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i/10).Format(time.DateOnly)
}

// Days is the number of distinct days of transactions first..first+n-1, so
// the number of balance assertions, prices, FX rates and index readings
// Sync(batch, first, n, _) carries.
func Days(first, n int) int {
	if n == 0 {
		return 0
	}
	return (first+n-1)/10 - first/10 + 1
}
