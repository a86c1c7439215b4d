package ibkrflex

import (
	"encoding/xml"
	"strings"
)

// field is one Flex Query attribute whose presence ibkr-flex tracks: what a
// statement carries depends on the fields the owner ticked in the portal,
// and a field missing from every row is the query's doing, not the row's:
// one problem for the section says which to tick (OF-20).
type field uint32

// The tracked attributes, one bit each.
const (
	fTradeDate field = 1 << iota
	fDateTime
	fReportDate
	fTransactionID
	fTradeID
	fQuantity
	fTradePrice
	fProceeds
	fCurrency
	fAssetCategory
	fSymbol
	fISIN
	fAmount
	fType
	fPosition
)

// flexField names an attribute as the statement writes it and as the Flex
// Query page of IBKR's portal labels its tick box.
type flexField struct {
	attr, label string
}

// flexFields describes every tracked field.
var flexFields = map[field]flexField{
	fTradeDate:     {"tradeDate", "Trade Date"},
	fDateTime:      {"dateTime", "Date/Time"},
	fReportDate:    {"reportDate", "Report Date"},
	fTransactionID: {"transactionID", "Transaction ID"},
	fTradeID:       {"tradeID", "Trade ID"},
	fQuantity:      {"quantity", "Quantity"},
	fTradePrice:    {"tradePrice", "Trade Price"},
	fProceeds:      {"proceeds", "Proceeds"},
	fCurrency:      {"currency", "Currency"},
	fAssetCategory: {"assetCategory", "Asset Class"},
	fSymbol:        {"symbol", "Symbol"},
	fISIN:          {"isin", "ISIN"},
	fAmount:        {"amount", "Amount"},
	fType:          {"type", "Type"},
	fPosition:      {"position", "Quantity"},
}

// fieldsByAttr finds a tracked field by its attribute name.
var fieldsByAttr = func() map[string]field {
	m := make(map[string]field, len(flexFields))
	for f, ff := range flexFields {
		m[ff.attr] = f
	}
	return m
}()

// fieldSet is the tracked attributes one row, or any row of a section,
// carries.
type fieldSet field

// has reports whether any of fs is in s.
func (s fieldSet) has(fs field) bool { return field(s)&fs != 0 }

// presentFields returns the tracked attributes of an element.
func presentFields(attrs []xml.Attr) fieldSet {
	var s fieldSet
	for _, a := range attrs {
		if a.Name.Space == "" {
			s |= fieldSet(fieldsByAttr[a.Name.Local])
		}
	}
	return s
}

// requirement is a group of fields of which a section must carry at least
// one for its rows to be mapped.
type requirement field

// missing returns the requirements none of whose fields the section
// carries, each written as the portal labels it ("Trade Date or
// Date/Time"); nil when nothing is missing.
func missing(present fieldSet, reqs ...requirement) []string {
	var out []string
	for _, r := range reqs {
		if present.has(field(r)) {
			continue
		}
		var labels []string
		for bit := field(1); bit != 0 && bit <= field(r); bit <<= 1 {
			if field(r)&bit != 0 {
				labels = append(labels, flexFields[bit].label)
			}
		}
		out = append(out, strings.Join(labels, " or "))
	}
	return out
}
