package ibkrflex

import (
	"strings"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// trade maps one trade execution: an FX conversion (asset category CASH)
// or a security bought or sold. Its source ID is IBKR's transactionID,
// unique to each booking: when IBKR cancels a trade and books it again, the
// rebooked trade may keep the original's tradeID, and the cancellation
// (transactionType TradeCancel, notes Ca, buySell "BUY (Ca.)") is a booking
// of its own with the opposite quantity and cash. All three are mapped as
// IBKR booked them, so the record holds the trade once, and importing an
// overlapping statement again adds nothing (D-18, OF-20).
func (m *mapper) trade(s *section, t trade) (*connectorv1.Transaction, *rowError) {
	if t.LevelOfDetail != "" && t.LevelOfDetail != "EXECUTION" {
		return nil, nil // orders, lots and summaries repeat executions
	}
	acct, e := m.account(s, t.AccountID)
	if e != nil {
		return nil, e
	}
	if e := requireFields(s, "Trades", "Trades", s.trades, tradeRequirements); e != nil {
		return nil, e
	}
	id := t.TransactionID
	if id == "" {
		id = t.TradeID
	}
	if id == "" {
		return nil, rowErr(ProblemUnreadableRow, "the trade has no transactionID or tradeID")
	}
	asset, e := assetOf(t.AssetCategory)
	if e != nil {
		return nil, e
	}
	day, field := t.TradeDate, "tradeDate"
	if day == "" {
		day, field = t.DateTime, "dateTime"
	}
	if day == "" {
		return nil, rowErr(ProblemUnreadableRow, "the trade has no tradeDate or dateTime")
	}
	date, e := m.date(s, field, day)
	if e != nil {
		return nil, e
	}
	value, e := m.valueDate(s, "settleDateTarget", t.SettleDate, date)
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
	if e := checkCancellation(s, t, qty); e != nil {
		return nil, e
	}
	proceeds, e := tradeProceeds(t, asset, qty)
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
	if asset.kind == assetFX {
		legs, e := m.fxLegs(acct, t, qty, proceeds, cash, cashAmount)
		if e != nil {
			return nil, e
		}
		tx.Postings = legs
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
			m.b.TransactionError(tx.SourceId, ProblemNetCashMismatch, "IBKR's netCash %s differs from proceeds, taxes and commission, %s", truncate(net.String()), truncate(cashAmount.String()))
		}
	}
	return tx, nil
}

// fxLegs are the postings of a currency conversion: cash moves between the
// two currencies through the fxConversion account, so each balances.
func (m *mapper) fxLegs(acct Account, t trade, qty, proceeds delivery.Decimal, cash string, cashAmount delivery.Decimal) ([]*connectorv1.Posting, *rowError) {
	base, quote, ok := strings.Cut(t.Symbol, ".")
	if !ok || quote != t.Currency || base == quote {
		return nil, rowErr(ProblemUnreadableRow, "FX trade symbol %q is not BASE.%s", truncate(t.Symbol), truncate(t.Currency))
	}
	baseCash, e := cashAccount(acct, base)
	if e != nil {
		return nil, e
	}
	conv, e := category(m.cfg.Categories.FXConversion, "fxConversion")
	if e != nil {
		return nil, e
	}
	return []*connectorv1.Posting{
		posting(baseCash, qty, base, ""),
		posting(conv, qty.Neg(), base, "currency conversion"),
		posting(cash, cashAmount, t.Currency, ""),
		posting(conv, proceeds.Neg(), t.Currency, "currency conversion"),
	}, nil
}

// tradeProceeds returns the trade's proceeds: the proceeds attribute, or
// else -(quantity × tradePrice × multiplier), exactly. The multiplier is 1
// when absent for categories traded by the unit; a bond's price is a
// percentage of its face value, so its proceeds are never computed.
func tradeProceeds(t trade, asset assetCategory, qty delivery.Decimal) (delivery.Decimal, *rowError) {
	if t.Proceeds != "" {
		return number("proceeds", t.Proceeds, false)
	}
	if asset.priceInPercent {
		return delivery.Decimal{}, rowErr(ProblemUnreadableRow, "the %s trade has no proceeds, which are not computed from a price in percent of face value: tick Proceeds under Trades in the Flex Query", t.AssetCategory)
	}
	price, e := number("tradePrice", t.TradePrice, false)
	if e != nil {
		return delivery.Decimal{}, e
	}
	mult := delivery.MustDecimal("1")
	switch {
	case t.Multiplier != "":
		if mult, e = number("multiplier", t.Multiplier, false); e != nil {
			return delivery.Decimal{}, e
		}
	case !asset.unitMultiplier:
		return delivery.Decimal{}, rowErr(ProblemUnreadableRow, "the %s trade has neither proceeds nor a multiplier: tick Proceeds or Multiplier under Trades in the Flex Query", t.AssetCategory)
	}
	return reduced(qty.Mul(price).Mul(mult).Neg()), nil
}

// isCancellation reports whether a trade row is IBKR's cancellation of an
// earlier booking.
func isCancellation(t trade) bool {
	if t.TransactionType == "TradeCancel" || strings.HasSuffix(t.BuySell, "(Ca.)") {
		return true
	}
	for _, code := range strings.FieldsFunc(t.Notes, func(r rune) bool { return r == ';' || r == ',' }) {
		if strings.TrimSpace(code) == "Ca" {
			return true
		}
	}
	return false
}

// checkCancellation refuses a cancellation whose quantity does not reverse
// the trade it names, when that trade is in the same statement: mapping it
// would book the trade twice instead of undoing it.
func checkCancellation(s *section, t trade, qty delivery.Decimal) *rowError {
	if !isCancellation(t) || t.OrigTransactionID == "" {
		return nil
	}
	orig, ok := s.quantity[t.OrigTransactionID]
	if !ok {
		return nil
	}
	o, err := delivery.ParseNumber(orig)
	if err != nil || qty.Add(o).IsZero() {
		return nil
	}
	return rowErr(ProblemCancelMismatch, "the cancellation's quantity %s does not reverse the quantity %s of transaction %s", truncate(qty.String()), truncate(o.String()), truncate(t.OrigTransactionID))
}

// reduced drops the trailing zeros a product's scale adds (3 × 1.50 is
// 4.5, not 4.50).
func reduced(d delivery.Decimal) delivery.Decimal {
	s := d.String()
	if !strings.Contains(s, ".") {
		return d
	}
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	r, err := delivery.ParseDecimal(s)
	if err != nil {
		return d
	}
	return r
}
