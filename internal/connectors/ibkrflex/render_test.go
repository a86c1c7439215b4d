package ibkrflex

import (
	"fmt"
	"strings"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// renderTx writes a transaction as one line:
// "source date[/value] description | account amount CUR [qty SYMBOL] (memo); ...".
func renderTx(t *connectorv1.Transaction) string {
	var legs []string
	for _, p := range t.GetPostings() {
		l := fmt.Sprintf("%s %s %s", p.GetAccountId(), p.GetAmount(), p.GetCurrency())
		if in := p.GetInstrument(); in != nil {
			l += fmt.Sprintf(" [%s %s %s]", p.GetQuantity(), in.GetSymbol(), in.GetIsin())
		}
		if p.GetMemo() != "" {
			l += " (" + p.GetMemo() + ")"
		}
		legs = append(legs, l)
	}
	date := t.GetDate()
	if t.GetValueDate() != "" {
		date += "/" + t.GetValueDate()
	}
	return fmt.Sprintf("%s %s %s | %s", t.GetSourceId(), date, t.GetDescription(), strings.Join(legs, "; "))
}

func renderAll(d *connectorv1.Delivery) (txs, balances, problems []string) {
	for _, t := range d.GetTransactions() {
		txs = append(txs, renderTx(t))
	}
	for _, b := range d.GetBalanceAssertions() {
		balances = append(balances, fmt.Sprintf("%s %s %s %s [%s %s]", b.GetAccountId(), b.GetDate(), b.GetAmount(), b.GetCurrency(), b.GetQuantity(), b.GetInstrument().GetSymbol()))
	}
	for _, p := range d.GetProblems() {
		problems = append(problems, fmt.Sprintf("%s %s %s %s: %s", p.GetSeverity(), p.GetCode(), p.GetSourceId(), p.GetLocation(), p.GetMessage()))
	}
	return txs, balances, problems
}
