package ibkrflex

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Institution is who ibkr-flex's deliveries come from.
var Institution = &connectorv1.Institution{Id: "ibkr", Name: "Interactive Brokers"}

// Problem codes ibkr-flex reports (D-49).
const (
	ProblemUnknownAccount  = "unknown_account"
	ProblemUnknownCategory = "unmapped_category"
	ProblemUnknownType     = "unknown_cash_transaction_type"
	ProblemUnreadableRow   = "unreadable_row"
	ProblemDuplicateRow    = "duplicate_row"
	ProblemNetCashMismatch = "net_cash_mismatch"
	// ProblemMissingFields: the statement lacks a field the Flex Query
	// must include; reported once for the section, naming the fields.
	ProblemMissingFields = "missing_flex_fields"
	// ProblemUnmappedAsset: a trade or position of an asset category
	// ibkr-flex does not map, named in the message.
	ProblemUnmappedAsset = "unmapped_asset_category"
	// ProblemAmbiguousDate: the statement writes dates dd/MM or MM/dd and
	// none of them tells which; reported once for the statement.
	ProblemAmbiguousDate = "ambiguous_date_format"
	// ProblemCancelMismatch: a cancellation that does not reverse the
	// trade it names.
	ProblemCancelMismatch = "cancellation_mismatch"
)

// flexQueriesPage is where the owner edits a Flex Query in IBKR's portal.
const flexQueriesPage = "Performance & Reports > Flex Queries"

// mapper maps the rows of one statement into a Builder.
type mapper struct {
	cfg    Config
	b      *delivery.Builder
	order  dateOrder
	seen   map[string]bool // source IDs delivered
	tally  tally
	groups []*groupProblem
	byKey  map[groupKey]*groupProblem
}

// tally counts the rows a mapping considered: every trade execution, cash
// transaction detail and non-cash open position is either mapped or left
// out with a problem. Summaries of other rows are skipped and not counted.
type tally struct {
	rows, mapped, leftOut int
}

// rowError is why one row is left out: a problem code and a message. A
// rowError with a group is a reason shared by every row of a section or of
// the statement, reported once for all of them (groupProblem).
type rowError struct {
	code, msg string
	group     string // location of the section or statement; empty for this row alone
}

func rowErr(code, format string, args ...any) *rowError {
	return &rowError{code: code, msg: fmt.Sprintf(format, args...)}
}

// groupErr is a reason that holds for every row at the location group.
func groupErr(group, code, format string, args ...any) *rowError {
	return &rowError{code: code, msg: fmt.Sprintf(format, args...), group: group}
}

// groupKey identifies one groupProblem.
type groupKey struct{ group, code, msg string }

// groupProblem is one problem for every row left out for the same reason.
type groupProblem struct {
	groupKey
	rows int
}

// section is one FlexStatement while it is mapped, with what its sections
// carry.
type section struct {
	st       flexStatement
	at       string // "FlexStatement[i]"
	trades   fieldSet
	cash     fieldSet
	position fieldSet
	quantity map[string]string // a trade's quantity by its transactionID, for cancellations
}

// Requirements of each section: a group of fields of which every statement
// must carry one (fields.go).
var (
	tradeRequirements = []requirement{
		requirement(fTradeDate | fDateTime), requirement(fTransactionID | fTradeID), requirement(fAssetCategory),
		requirement(fSymbol | fISIN), requirement(fCurrency), requirement(fQuantity), requirement(fProceeds | fTradePrice),
	}
	cashRequirements = []requirement{
		requirement(fDateTime | fReportDate), requirement(fTransactionID), requirement(fType),
		requirement(fCurrency), requirement(fAmount),
	}
	positionRequirements = []requirement{
		requirement(fSymbol | fISIN), requirement(fCurrency), requirement(fPosition),
	}
)

// mapStatement adds every row of r to b and returns how many rows it
// mapped and left out.
func mapStatement(cfg Config, b *delivery.Builder, r *flexQueryResponse) tally {
	m := &mapper{cfg: cfg, b: b, order: dateOrderOf(r.dates()), seen: make(map[string]bool), byKey: make(map[groupKey]*groupProblem)}
	for i, st := range r.Statements {
		s := newSection(i, st)
		for j, t := range st.Trades {
			m.row(fmt.Sprintf("%s/Trades/Trade[%d]", s.at, j), func() (*connectorv1.Transaction, *rowError) { return m.trade(s, t) })
		}
		for j, c := range st.Cash {
			m.row(fmt.Sprintf("%s/CashTransactions/CashTransaction[%d]", s.at, j), func() (*connectorv1.Transaction, *rowError) { return m.cash(s, c) })
		}
		for j, p := range st.Positions {
			m.positionRow(fmt.Sprintf("%s/OpenPositions/OpenPosition[%d]", s.at, j), s, p)
		}
	}
	for _, g := range m.groups {
		noun := "rows are"
		if g.rows == 1 {
			noun = "row is"
		}
		m.b.Error(g.code, g.group, "%s; %d %s left out", g.msg, g.rows, noun)
	}
	return m.tally
}

// newSection records what the FlexStatement's sections carry.
func newSection(i int, st flexStatement) *section {
	s := &section{st: st, at: fmt.Sprintf("FlexStatement[%d]", i), quantity: make(map[string]string)}
	for _, t := range st.Trades {
		s.trades |= t.present
		if t.TransactionID != "" {
			s.quantity[t.TransactionID] = t.Quantity
		}
	}
	for _, c := range st.Cash {
		s.cash |= c.present
	}
	for _, p := range st.Positions {
		s.position |= p.present
	}
	return s
}

// row adds the transaction mapRow returns, or reports why the row at loc
// is left out. A nil transaction without error is a row that is skipped on
// purpose (a summary of other rows).
func (m *mapper) row(loc string, mapRow func() (*connectorv1.Transaction, *rowError)) {
	t, e := mapRow()
	switch {
	case e != nil:
		m.leaveOut(loc, e, "row")
	case t == nil:
	case m.seen[t.SourceId]:
		m.tally.rows++
		m.tally.leftOut++
		m.b.Warn(ProblemDuplicateRow, loc, "transaction %s appears again in the statement; the repeat is left out", t.SourceId)
	default:
		m.tally.rows++
		m.tally.mapped++
		m.seen[t.SourceId] = true
		m.b.Transaction(t)
	}
}

// positionRow adds the balance assertion of an open position, or reports
// why it is left out.
func (m *mapper) positionRow(loc string, s *section, p openPosition) {
	a, e := m.position(s, p)
	switch {
	case e != nil:
		m.leaveOut(loc, e, "position")
	case a != nil:
		m.tally.rows++
		m.tally.mapped++
		m.b.Balance(a)
	}
}

// leaveOut reports a row left out: alone, or counted into its group's one
// problem.
func (m *mapper) leaveOut(loc string, e *rowError, what string) {
	m.tally.rows++
	m.tally.leftOut++
	if e.group == "" {
		m.b.Error(e.code, loc, "%s; the %s is left out", e.msg, what)
		return
	}
	k := groupKey{group: e.group, code: e.code, msg: e.msg}
	g, ok := m.byKey[k]
	if !ok {
		g = &groupProblem{groupKey: k}
		m.byKey[k] = g
		m.groups = append(m.groups, g)
	}
	g.rows++
}

// requireFields returns the error for a row of a section that lacks
// required fields in every row: one problem for the section, naming the
// fields as the portal labels them and where to tick them.
func requireFields(s *section, xmlSection, portalSection string, present fieldSet, reqs []requirement) *rowError {
	miss := missing(present, reqs...)
	if len(miss) == 0 {
		return nil
	}
	return groupErr(s.at+"/"+xmlSection, ProblemMissingFields,
		"the Flex Query's %s section includes no %s: in %s, edit the query, tick %s under %s, and run it again",
		portalSection, strings.Join(miss, ", "), flexQueriesPage, strings.Join(miss, " and "), portalSection)
}

// account returns the config of the row's IBKR account. A statement whose
// own account is not configured is one problem for all its rows.
func (m *mapper) account(s *section, rowAccount string) (Account, *rowError) {
	id := rowAccount
	if id == "" {
		id = s.st.AccountID
	}
	a, ok := m.cfg.Accounts[id]
	if ok {
		return a, nil
	}
	e := rowErr(ProblemUnknownAccount, "IBKR account %q is not in the config's accounts", truncate(id))
	if id == s.st.AccountID {
		e.group = s.at
	}
	return Account{}, e
}

// date reads a Flex date or date-time; a slash date whose order the
// statement does not tell is one problem for the statement.
func (m *mapper) date(s *section, field, v string) (string, *rowError) {
	d, err := m.order.read(v)
	switch {
	case errors.Is(err, errAmbiguousDate):
		return "", groupErr(s.at, ProblemAmbiguousDate,
			"the statement writes dates as dd/MM or MM/dd and none of its dates tells which: in %s, set the Flex Query's Date Format to yyyyMMdd or yyyy-MM-dd", flexQueriesPage)
	case err != nil:
		return "", rowErr(ProblemUnreadableRow, "%s: %v", field, err)
	}
	return d, nil
}

// valueDate reads a settle date, which is empty when absent or equal to
// the booking date.
func (m *mapper) valueDate(s *section, field, v, date string) (string, *rowError) {
	if v == "" {
		return "", nil
	}
	d, e := m.date(s, field, v)
	if e != nil || d == date {
		return "", e
	}
	return d, nil
}

// cashAccount returns the OpenFief account of a's cash in currency.
func cashAccount(a Account, currency string) (string, *rowError) {
	if !delivery.IsCurrency(currency) {
		return "", rowErr(ProblemUnreadableRow, "currency %q is not an ISO 4217 code", truncate(currency))
	}
	id, ok := a.Cash[currency]
	if !ok {
		return "", rowErr(ProblemUnknownAccount, "the config maps no cash account for %s", currency)
	}
	return id, nil
}

// category returns a category's account, or why it cannot be used.
func category(id, name string) (string, *rowError) {
	if id == "" {
		return "", rowErr(ProblemUnknownCategory, "the config's categories.%s is not set", name)
	}
	return id, nil
}

// number reads an exact decimal from a Flex attribute; empty is zero when
// optional.
func number(field, s string, optional bool) (delivery.Decimal, *rowError) {
	if s == "" && optional {
		return delivery.Decimal{}, nil
	}
	d, err := delivery.ParseNumber(s)
	if err != nil {
		return delivery.Decimal{}, rowErr(ProblemUnreadableRow, "%s %q is not a decimal", field, truncate(s))
	}
	return d, nil
}

// instrument describes the security of a row.
func instrument(f instrumentFields, currency string) (*connectorv1.Instrument, *rowError) {
	in := &connectorv1.Instrument{Symbol: clean(f.Symbol), Currency: currency, Name: clean(f.Description)}
	if isISIN(f.ISIN) {
		in.Isin = f.ISIN
	}
	if in.Isin == "" && in.Symbol == "" {
		return nil, rowErr(ProblemUnreadableRow, "no ISIN or symbol for the security")
	}
	return in, nil
}

// assetOf returns the asset category of a row, or why it is left out.
func assetOf(name string) (assetCategory, *rowError) {
	c, ok := assetCategories[name]
	switch {
	case !ok:
		return assetCategory{}, rowErr(ProblemUnmappedAsset, "asset category %q is not one ibkr-flex maps", truncate(name))
	case c.kind == assetUnmapped:
		return assetCategory{}, rowErr(ProblemUnmappedAsset, "asset category %s is not mapped: %s", name, c.why)
	}
	return c, nil
}

func posting(account string, amount delivery.Decimal, currency, memo string) *connectorv1.Posting {
	return &connectorv1.Posting{AccountId: account, Amount: amount.String(), Currency: currency, Memo: memo}
}

// isISIN reports whether s has an ISIN's shape.
func isISIN(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := 0; i < 12; i++ {
		c := s[i]
		letter, digit := c >= 'A' && c <= 'Z', c >= '0' && c <= '9'
		if (i < 2 && !letter) || (i == 11 && !digit) || (!letter && !digit) {
			return false
		}
	}
	return true
}

// clean makes outside text fit a Delivery: valid UTF-8, trimmed, at most
// 256 runes.
func clean(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if utf8.RuneCountInString(s) > 256 {
		s = string([]rune(s)[:256])
	}
	return s
}

// truncate shortens outside input quoted in a problem, keeping it valid
// UTF-8.
func truncate(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:40]) + "..."
	}
	return s
}
