package ibkrflex

import (
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
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

// cash maps one cash transaction: its amount on the cash account, balanced
// by the category its type maps to. Its date is dateTime's, else
// reportDate's; settleDate, when present and different, is its value date.
func (m *mapper) cash(s *section, c cashTransaction) (*connectorv1.Transaction, *rowError) {
	if c.LevelOfDetail != "" && c.LevelOfDetail != "DETAIL" {
		return nil, nil // summaries repeat the detail rows
	}
	acct, e := m.account(s, c.AccountID)
	if e != nil {
		return nil, e
	}
	if e := requireFields(s, "CashTransactions", "Cash Transactions", s.cash, cashRequirements); e != nil {
		return nil, e
	}
	if c.TransactionID == "" {
		return nil, rowErr(ProblemUnreadableRow, "the cash transaction has no transactionID")
	}
	catFor, ok := cashTypes[c.Type]
	if !ok {
		return nil, rowErr(ProblemUnknownType, "cash transaction type %q is not one ibkr-flex maps", truncate(c.Type))
	}
	day, field := c.DateTime, "dateTime"
	if day == "" {
		day, field = c.ReportDate, "reportDate"
	}
	if day == "" {
		return nil, rowErr(ProblemUnreadableRow, "the cash transaction has no dateTime or reportDate")
	}
	date, e := m.date(s, field, day)
	if e != nil {
		return nil, e
	}
	value, e := m.valueDate(s, "settleDate", c.SettleDate, date)
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
