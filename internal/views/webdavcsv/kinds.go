package webdavcsv

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
)

// Kind is a kind of entry, and the suffix of its monthly file:
// <YYYY>/<YYYY-MM>-<kind>.csv.
type Kind string

// The kinds of entry the view writes, one file per month each.
const (
	KindFXRates       Kind = "fx-rates"
	KindPrices        Kind = "prices"
	KindIndexReadings Kind = "index-readings"
	KindTransactions  Kind = "transactions"
	KindBalances      Kind = "balances"
)

// KindNames are the config's names of the kinds, sorted.
func KindNames() []string {
	return []string{string(KindBalances), string(KindFXRates), string(KindIndexReadings), string(KindPrices), string(KindTransactions)}
}

// leading are the first columns of every file: the entry's sequence number,
// the connector instance that delivered it and its institution.
var leading = []string{"sequence", "source", "institution", "institution_name"}

// instrumentColumns describe an instrument.
var instrumentColumns = []string{"isin", "symbol", "exchange", "instrument_currency", "instrument_name"}

// Header returns the fixed header of kind's files; nil for an unknown kind.
func Header(k Kind) []string {
	var own []string
	switch k {
	case KindFXRates:
		own = []string{"date", "base_currency", "quote_currency", "rate", "source_ref"}
	case KindPrices:
		own = concat([]string{"date"}, instrumentColumns, []string{"price", "currency"})
	case KindIndexReadings:
		own = []string{"date", "index_id", "value", "name"}
	case KindTransactions:
		own = concat([]string{"source_id", "date", "value_date", "description", "payee", "posting", "account_id", "amount", "currency"},
			instrumentColumns, []string{"quantity", "memo"})
	case KindBalances:
		own = concat([]string{"date", "account_id", "amount", "currency"}, instrumentColumns, []string{"quantity"})
	default:
		return nil
	}
	return concat(leading, own)
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// record is one entry as rows of its kind's file: one row, or for a
// transaction one row per posting with the transaction's fields repeated.
type record struct {
	sequence uint64
	kind     Kind
	// month is the entry's date's YYYY-MM.
	month string
	rows  [][]string
}

// errNoKind is returned for an entry whose kind this view does not know.
var errNoKind = errors.New("the entry has no kind this view knows")

// recordOf turns an entry into its rows. Values are written as the contract
// gives them (decimal strings stay strings); cells are neutralised only when
// the file is encoded.
func recordOf(e *viewv1.Entry) (record, error) {
	r := record{sequence: e.GetSequence()}
	lead := []string{strconv.FormatUint(e.GetSequence(), 10), e.GetSource(), e.GetInstitution().GetId(), e.GetInstitution().GetName()}
	var date string
	switch x := e.GetEntry().(type) {
	case *viewv1.Entry_FxRate:
		v := x.FxRate
		r.kind, date = KindFXRates, v.GetDate()
		r.rows = [][]string{concat(lead, []string{v.GetDate(), v.GetBaseCurrency(), v.GetQuoteCurrency(), v.GetRate(), v.GetSourceRef()})}
	case *viewv1.Entry_Price:
		v := x.Price
		r.kind, date = KindPrices, v.GetDate()
		r.rows = [][]string{concat(lead, []string{v.GetDate()}, instrument(v.GetInstrument()), []string{v.GetPrice(), v.GetCurrency()})}
	case *viewv1.Entry_IndexReading:
		v := x.IndexReading
		r.kind, date = KindIndexReadings, v.GetDate()
		r.rows = [][]string{concat(lead, []string{v.GetDate(), v.GetIndexId(), v.GetValue(), v.GetName()})}
	case *viewv1.Entry_Transaction:
		v := x.Transaction
		r.kind, date = KindTransactions, v.GetDate()
		tx := []string{v.GetSourceId(), v.GetDate(), v.GetValueDate(), v.GetDescription(), v.GetPayee()}
		for i, p := range v.GetPostings() {
			r.rows = append(r.rows, concat(lead, tx,
				[]string{strconv.Itoa(i + 1), p.GetAccountId(), p.GetAmount(), p.GetCurrency()},
				instrument(p.GetInstrument()), []string{p.GetQuantity(), p.GetMemo()}))
		}
		if len(r.rows) == 0 {
			// A transaction without postings still gets its row, so
			// the file shows it and its sequence is kept.
			r.rows = [][]string{concat(lead, tx, make([]string, len(Header(KindTransactions))-len(lead)-len(tx)))}
		}
	case *viewv1.Entry_BalanceAssertion:
		v := x.BalanceAssertion
		r.kind, date = KindBalances, v.GetDate()
		r.rows = [][]string{concat(lead, []string{v.GetDate(), v.GetAccountId(), v.GetAmount(), v.GetCurrency()},
			instrument(v.GetInstrument()), []string{v.GetQuantity()})}
	default:
		return record{}, fmt.Errorf("entry %d: %w", e.GetSequence(), errNoKind)
	}
	if !delivery.IsDate(date) {
		return record{}, fmt.Errorf("entry %d: date %q is not a YYYY-MM-DD date", e.GetSequence(), display.Text(date))
	}
	r.month = date[:7]
	return r, nil
}

// instrument is an instrument's columns; all empty when it is unset.
func instrument(i *connectorv1.Instrument) []string {
	return []string{i.GetIsin(), i.GetSymbol(), i.GetExchange(), i.GetCurrency(), i.GetName()}
}

// path is the file of kind k for month (YYYY-MM), relative to the folder.
func path(k Kind, month string) string {
	return month[:4] + "/" + month + "-" + string(k) + ".csv"
}
