package ibkrflex

import (
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
)

// cashTypes maps a cash transaction's type to the category that balances it.
var cashTypes = map[string]func(Categories) (string, string){
	"Dividends":                    func(c Categories) (string, string) { return c.Dividends, "dividends" },
	"Payment In Lieu Of Dividends": func(c Categories) (string, string) { return c.Dividends, "dividends" },
	"Withholding Tax":              func(c Categories) (string, string) { return c.WithholdingTax, "withholdingTax" },
	"Broker Interest Received":     func(c Categories) (string, string) { return c.Interest, "interest" },
	"Broker Interest Paid":         func(c Categories) (string, string) { return c.Interest, "interest" },
	"Bond Interest Received":       func(c Categories) (string, string) { return c.Interest, "interest" },
	"Bond Interest Paid":           func(c Categories) (string, string) { return c.Interest, "interest" },
	"Other Fees":                   func(c Categories) (string, string) { return c.Fees, "fees" },
	"Commission Adjustments":       func(c Categories) (string, string) { return c.Commissions, "commissions" },
	"Deposits/Withdrawals":         func(c Categories) (string, string) { return c.Transfers, "transfers" },
	"Deposits & Withdrawals":       func(c Categories) (string, string) { return c.Transfers, "transfers" },
}

// mapper maps the rows of one statement into a Builder.
type mapper struct {
	cfg  Config
	b    *delivery.Builder
	seen map[string]bool // source IDs delivered
}

// rowError is why one row is left out: a problem code and a message.
type rowError struct{ code, msg string }

func rowErr(code, format string, args ...any) *rowError {
	return &rowError{code: code, msg: fmt.Sprintf(format, args...)}
}

// mapStatement adds every row of r to b.
func mapStatement(cfg Config, b *delivery.Builder, r *flexQueryResponse) {
	m := &mapper{cfg: cfg, b: b, seen: make(map[string]bool)}
	for i, st := range r.Statements {
		at := fmt.Sprintf("FlexStatement[%d]", i)
		for j, t := range st.Trades {
			m.row(fmt.Sprintf("%s/Trades/Trade[%d]", at, j), func() (*connectorv1.Transaction, *rowError) { return m.trade(st, t) })
		}
		for j, c := range st.Cash {
			m.row(fmt.Sprintf("%s/CashTransactions/CashTransaction[%d]", at, j), func() (*connectorv1.Transaction, *rowError) { return m.cash(st, c) })
		}
		for j, p := range st.Positions {
			loc := fmt.Sprintf("%s/OpenPositions/OpenPosition[%d]", at, j)
			if a, e := m.position(st, p); e != nil {
				m.b.Error(e.code, loc, "%s; the position is left out", e.msg)
			} else if a != nil {
				m.b.Balance(a)
			}
		}
	}
}

// row adds the transaction mapRow returns, or reports why the row at loc
// is left out. A nil transaction without error is a row that is skipped on
// purpose (a summary of other rows).
func (m *mapper) row(loc string, mapRow func() (*connectorv1.Transaction, *rowError)) {
	t, e := mapRow()
	switch {
	case e != nil:
		m.b.Error(e.code, loc, "%s; the row is left out", e.msg)
	case t == nil:
	case m.seen[t.SourceId]:
		m.b.Warn(ProblemDuplicateRow, loc, "transaction %s appears again in the statement; the repeat is left out", t.SourceId)
	default:
		m.seen[t.SourceId] = true
		m.b.Transaction(t)
	}
}

// account returns the config of the row's IBKR account.
func (m *mapper) account(st flexStatement, rowAccount string) (Account, *rowError) {
	id := rowAccount
	if id == "" {
		id = st.AccountID
	}
	a, ok := m.cfg.Accounts[id]
	if !ok {
		return Account{}, rowErr(ProblemUnknownAccount, "IBKR account %q is not in the config's accounts", truncate(id))
	}
	return a, nil
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

// dates reads a row's booking date and its value date, which is empty when
// absent or equal to the booking date.
func dates(date, valueDate string) (string, string, *rowError) {
	d, err := flexDate(date)
	if err != nil {
		return "", "", rowErr(ProblemUnreadableRow, "%v", err)
	}
	if valueDate == "" {
		return d, "", nil
	}
	v, err := flexDate(valueDate)
	if err != nil {
		return "", "", rowErr(ProblemUnreadableRow, "%v", err)
	}
	if v == d {
		v = ""
	}
	return d, v, nil
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

// trade maps one trade: an FX conversion (asset category CASH) or a
// security bought or sold.
func (m *mapper) trade(st flexStatement, t trade) (*connectorv1.Transaction, *rowError) {
	if t.LevelOfDetail != "" && t.LevelOfDetail != "EXECUTION" {
		return nil, nil // orders, lots and summaries repeat executions
	}
	id := t.TradeID
	if id == "" {
		id = t.TransactionID
	}
	if id == "" {
		return nil, rowErr(ProblemUnreadableRow, "the trade has no tradeID or transactionID")
	}
	acct, e := m.account(st, t.AccountID)
	if e != nil {
		return nil, e
	}
	date, value, e := dates(t.TradeDate, t.SettleDate)
	if e != nil {
		return nil, e
	}
	cash, e := cashAccount(acct, t.Currency)
	if e != nil {
		return nil, e
	}
	qty, e := number("quantity", t.Quantity, false)
	if e != nil {
		return nil, e
	}
	proceeds, e := number("proceeds", t.Proceeds, false)
	if e != nil {
		return nil, e
	}
	commission, e := number("ibCommission", t.Commission, true)
	if e != nil {
		return nil, e
	}
	taxes, e := number("taxes", t.Taxes, true)
	if e != nil {
		return nil, e
	}
	commCur := t.CommissionCur
	if commCur == "" {
		commCur = t.Currency
	}
	tx := &connectorv1.Transaction{
		SourceId:    "trade:" + clean(id),
		Date:        date,
		ValueDate:   value,
		Description: clean(strings.Join(strings.Fields(t.BuySell+" "+t.Quantity+" "+t.Symbol+" @ "+t.TradePrice+" "+t.Currency), " ")),
	}
	// The cash leg: proceeds and taxes, and the commission when it is in
	// the trade's currency (then it equals netCash).
	cashAmount := proceeds.Add(taxes)
	if commCur == t.Currency {
		cashAmount = cashAmount.Add(commission)
	}
	if strings.EqualFold(t.AssetCategory, "CASH") {
		base, quote, ok := strings.Cut(t.Symbol, ".")
		if !ok || quote != t.Currency || base == quote {
			return nil, rowErr(ProblemUnreadableRow, "FX trade symbol %q is not BASE.%s", truncate(t.Symbol), t.Currency)
		}
		baseCash, e := cashAccount(acct, base)
		if e != nil {
			return nil, e
		}
		conv, e := category(m.cfg.Categories.FXConversion, "fxConversion")
		if e != nil {
			return nil, e
		}
		tx.Postings = append(tx.Postings,
			posting(baseCash, qty, base, ""),
			posting(conv, qty.Neg(), base, "currency conversion"),
			posting(cash, cashAmount, t.Currency, ""),
			posting(conv, proceeds.Neg(), t.Currency, "currency conversion"),
		)
	} else {
		if acct.Securities == "" {
			return nil, rowErr(ProblemUnknownAccount, "the config maps no securities account for this IBKR account")
		}
		in, e := instrument(t.instrumentFields, t.Currency)
		if e != nil {
			return nil, e
		}
		sec := posting(acct.Securities, proceeds.Neg(), t.Currency, "")
		sec.Instrument, sec.Quantity = in, qty.String()
		tx.Postings = append(tx.Postings, sec, posting(cash, cashAmount, t.Currency, ""))
	}
	if !commission.IsZero() {
		comm, e := category(m.cfg.Categories.Commissions, "commissions")
		if e != nil {
			return nil, e
		}
		if commCur != t.Currency {
			commCash, e := cashAccount(acct, commCur)
			if e != nil {
				return nil, e
			}
			tx.Postings = append(tx.Postings, posting(commCash, commission, commCur, "commission"))
		}
		tx.Postings = append(tx.Postings, posting(comm, commission.Neg(), commCur, "commission"))
	}
	if !taxes.IsZero() {
		fees, e := category(m.cfg.Categories.Fees, "fees")
		if e != nil {
			return nil, e
		}
		tx.Postings = append(tx.Postings, posting(fees, taxes.Neg(), t.Currency, "transaction tax"))
	}
	if t.NetCash != "" && commCur == t.Currency {
		if net, e := number("netCash", t.NetCash, false); e == nil && net.Cmp(cashAmount) != 0 {
			m.b.TransactionError(tx.SourceId, ProblemNetCashMismatch, "IBKR's netCash %s differs from proceeds, taxes and commission, %s", net, cashAmount)
		}
	}
	return tx, nil
}

// cash maps one cash transaction: its amount on the cash account, balanced
// by the category its type maps to.
func (m *mapper) cash(st flexStatement, c cashTransaction) (*connectorv1.Transaction, *rowError) {
	if c.LevelOfDetail != "" && c.LevelOfDetail != "DETAIL" {
		return nil, nil // summaries repeat the detail rows
	}
	if c.TransactionID == "" {
		return nil, rowErr(ProblemUnreadableRow, "the cash transaction has no transactionID")
	}
	catFor, ok := cashTypes[c.Type]
	if !ok {
		return nil, rowErr(ProblemUnknownType, "cash transaction type %q is not one ibkr-flex maps", truncate(c.Type))
	}
	acct, e := m.account(st, c.AccountID)
	if e != nil {
		return nil, e
	}
	day := c.DateTime
	if day == "" {
		day = c.ReportDate
	}
	date, value, e := dates(day, c.SettleDate)
	if e != nil {
		return nil, e
	}
	cashID, e := cashAccount(acct, c.Currency)
	if e != nil {
		return nil, e
	}
	amount, e := number("amount", c.Amount, false)
	if e != nil {
		return nil, e
	}
	cat, e := category(catFor(m.cfg.Categories))
	if e != nil {
		return nil, e
	}
	return &connectorv1.Transaction{
		SourceId:    "cash:" + clean(c.TransactionID),
		Date:        date,
		ValueDate:   value,
		Description: clean(c.Description),
		Postings: []*connectorv1.Posting{
			posting(cashID, amount, c.Currency, ""),
			posting(cat, amount.Neg(), c.Currency, clean(c.Type)),
		},
	}, nil
}

// position maps one open position to a balance assertion of the
// securities account.
func (m *mapper) position(st flexStatement, p openPosition) (*connectorv1.BalanceAssertion, *rowError) {
	if (p.LevelOfDetail != "" && p.LevelOfDetail != "SUMMARY") || strings.EqualFold(p.AssetCategory, "CASH") {
		return nil, nil
	}
	acct, e := m.account(st, p.AccountID)
	if e != nil {
		return nil, e
	}
	if acct.Securities == "" {
		return nil, rowErr(ProblemUnknownAccount, "the config maps no securities account for this IBKR account")
	}
	date, err := flexDate(p.ReportDate)
	if err != nil {
		return nil, rowErr(ProblemUnreadableRow, "%v", err)
	}
	if !delivery.IsCurrency(p.Currency) {
		return nil, rowErr(ProblemUnreadableRow, "currency %q is not an ISO 4217 code", truncate(p.Currency))
	}
	qty, e := number("position", p.Position, false)
	if e != nil {
		return nil, e
	}
	in, e := instrument(p.instrumentFields, p.Currency)
	if e != nil {
		return nil, e
	}
	a := &connectorv1.BalanceAssertion{AccountId: acct.Securities, Date: date, Instrument: in, Quantity: qty.String()}
	if p.PositionValue != "" {
		v, e := number("positionValue", p.PositionValue, false)
		if e != nil {
			return nil, e
		}
		a.Amount, a.Currency = v.String(), p.Currency
	}
	return a, nil
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
