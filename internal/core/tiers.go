package core

import (
	"fmt"
	"slices"
	"strings"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// TierAccounts is the data tier a plugin needs to deliver the household's own
// account data: transactions (with their postings) and balance assertions
// (OF-11).
const TierAccounts = "accounts"

// CheckTiers refuses a delivery that holds data outside the data tiers the
// plugin instance holds (its effective permissions, granted and requested),
// as OF-11 decides P-33: public reference data (prices, FX rates, index
// readings) needs no tier, because institutions publish it to everyone and
// it says nothing about the household; the household's account data
// (transactions, balance assertions) needs TierAccounts. Problems are the
// connector's notes about the delivery itself and need nothing. The error
// names what the delivery holds and what the grant lacks; the caller stores
// nothing of the batch.
func CheckTiers(d *connectorv1.Delivery, tiers []string) error {
	if slices.Contains(tiers, TierAccounts) {
		return nil
	}
	var held []string
	if n := len(d.GetTransactions()); n > 0 {
		held = append(held, fmt.Sprintf("%d transactions", n))
	}
	if n := len(d.GetBalanceAssertions()); n > 0 {
		held = append(held, fmt.Sprintf("%d balance assertions", n))
	}
	if len(held) == 0 {
		return nil
	}
	granted := "none"
	if len(tiers) > 0 {
		granted = strings.Join(slices.Sorted(slices.Values(tiers)), ", ")
	}
	return fmt.Errorf("%w: the delivery holds %s, account data that needs the data tier %q, and the plugin holds %s",
		ErrOutsideTiers, strings.Join(held, " and "), TierAccounts, granted)
}
