package core

import (
	"errors"
	"strings"
	"testing"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

func TestCheckTiers(t *testing.T) {
	rates := &connectorv1.Delivery{FxRates: []*connectorv1.FxRate{{}}, Prices: []*connectorv1.Price{{}}, IndexReadings: []*connectorv1.IndexReading{{}}}
	txns := &connectorv1.Delivery{Transactions: []*connectorv1.Transaction{{}, {}}}
	balances := &connectorv1.Delivery{BalanceAssertions: []*connectorv1.BalanceAssertion{{}}}
	problems := &connectorv1.Delivery{Problems: []*connectorv1.IngestProblem{{}}}
	for name, tc := range map[string]struct {
		d       *connectorv1.Delivery
		tiers   []string
		wantErr string
	}{
		"market data, no tier":       {d: rates},
		"problems only, no tier":     {d: problems},
		"empty delivery":             {d: &connectorv1.Delivery{}},
		"transactions with accounts": {d: txns, tiers: []string{"other", TierAccounts}},
		"balances with accounts":     {d: balances, tiers: []string{TierAccounts}},
		"transactions, no tier":      {d: txns, wantErr: `2 transactions, account data that needs the data tier "accounts", and the plugin holds none`},
		"balances, another tier":     {d: balances, tiers: []string{"z", "b"}, wantErr: "1 balance assertions, account data that needs the data tier \"accounts\", and the plugin holds b, z"},
		"both, no tier":              {d: &connectorv1.Delivery{Transactions: txns.Transactions, BalanceAssertions: balances.BalanceAssertions}, wantErr: "2 transactions and 1 balance assertions"},
		"a tier named like accounts": {d: txns, tiers: []string{"Accounts", "account"}, wantErr: "holds Accounts, account"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckTiers(tc.d, tc.tiers)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrOutsideTiers) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want ErrOutsideTiers containing %q", err, tc.wantErr)
			}
		})
	}
}
