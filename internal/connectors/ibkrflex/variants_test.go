package ibkrflex

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/variants/*.want from the mapping")

// variantsConfig is testConfig with a second IBKR account, U2345678; the
// third account of multi-account.xml, U7777777, stays unknown.
func variantsConfig() Config {
	cfg := testConfig()
	cfg.Accounts["U2345678"] = Account{Cash: map[string]string{"EUR": "ibkr2-eur", "USD": "ibkr2-usd"}, Securities: "ibkr2-securities"}
	return cfg
}

// mapped is the outcome of mapping one statement.
type mapped struct {
	d     *connectorv1.Delivery
	tally tally
}

// mapXML maps a statement the way ImportFile does and checks what must
// hold for every statement: it is read, it builds a valid delivery, every
// transaction balances, and every row counted is either in the delivery or
// left out with a problem.
func mapXML(t *testing.T, cfg Config, b []byte) mapped {
	t.Helper()
	st, err := readStatement(b)
	if err != nil {
		t.Fatalf("readStatement: %v", err)
	}
	db := delivery.NewBuilder("batch", Institution)
	n := mapStatement(cfg, db, st)
	d, err := db.Build("")
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	checkInvariants(t, st, n, d)
	return mapped{d: d, tally: n}
}

// checkInvariants checks a mapping against the statement it came from.
func checkInvariants(t testing.TB, st *flexQueryResponse, n tally, d *connectorv1.Delivery) {
	t.Helper()
	if want := countRows(st); n.rows != want {
		t.Errorf("the mapping counted %d rows, the statement has %d to map", n.rows, want)
	}
	if got := len(d.GetTransactions()) + len(d.GetBalanceAssertions()); n.mapped != got || n.mapped+n.leftOut != n.rows {
		t.Errorf("tally %+v, delivery holds %d transactions and balances", n, got)
	}
	if n.leftOut > 0 && len(d.GetProblems()) == 0 {
		t.Errorf("%d rows left out without a problem", n.leftOut)
	}
	for _, p := range d.GetProblems() {
		if p.GetCode() == delivery.ProblemUnbalanced {
			t.Errorf("unbalanced transaction: %s", p.GetMessage())
		}
		if len(p.GetMessage()) > 600 || len(p.GetLocation()) > 100 {
			t.Errorf("problem longer than its bound: %q at %q", p.GetMessage(), p.GetLocation())
		}
	}
}

// countRows counts the rows of a statement a mapping must account for:
// trade executions, cash transaction details and open positions other than
// cash, at their level of detail or with none given.
func countRows(r *flexQueryResponse) int {
	n := 0
	for _, st := range r.Statements {
		for _, t := range st.Trades {
			if t.LevelOfDetail == "" || t.LevelOfDetail == "EXECUTION" {
				n++
			}
		}
		for _, c := range st.Cash {
			if c.LevelOfDetail == "" || c.LevelOfDetail == "DETAIL" {
				n++
			}
		}
		for _, p := range st.Positions {
			if (p.LevelOfDetail == "" || p.LevelOfDetail == "SUMMARY") && !strings.EqualFold(p.AssetCategory, "CASH") {
				n++
			}
		}
	}
	return n
}

// render writes a delivery as the lines of a .want file.
func render(d *connectorv1.Delivery) string {
	txs, balances, problems := renderAll(d)
	var b strings.Builder
	for _, part := range []struct {
		name  string
		lines []string
	}{{"transactions", txs}, {"balances", balances}, {"problems", problems}} {
		fmt.Fprintf(&b, "# %s\n", part.name)
		for _, l := range part.lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestVariants maps each statement in testdata/variants, written in the
// shape IBKR documents for the choices an owner makes in a Flex Query, and
// compares the delivery with its .want file (go test -run TestVariants
// -update rewrites them; read the diff).
func TestVariants(t *testing.T) {
	files, err := filepath.Glob("testdata/variants/*.xml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no variants: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".xml")
		t.Run(name, func(t *testing.T) {
			m := mapXML(t, variantsConfig(), readTestdata(t, filepath.Join("variants", name+".xml")))
			got := render(m.d)
			wantFile := filepath.Join("testdata", "variants", name+".want")
			if *update {
				if err := os.WriteFile(wantFile, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", wantFile, diff)
			}
		})
	}
}

// TestEachAttributeAbsent takes all-fields.xml, where every row carries
// every attribute ibkr-flex reads, removes attributes from every row as a
// Flex Query without those fields would, and checks what is still mapped:
// an optional field's absence loses nothing, a required field's absence is
// one missing_flex_fields problem per section, not one per row.
func TestEachAttributeAbsent(t *testing.T) {
	base := readTestdata(t, "variants/all-fields.xml")
	const rows = 8 // 4 trades, 1 cash transaction, 3 positions
	tests := map[string]struct {
		drop     []string
		mapped   int
		problems []string // codes
	}{
		"nothing":                  {mapped: rows},
		"tradeDate":                {drop: []string{"tradeDate"}, mapped: rows},
		"dateTime":                 {drop: []string{"dateTime"}, mapped: rows},
		"tradeDate and dateTime":   {drop: []string{"tradeDate", "dateTime"}, mapped: 4, problems: []string{ProblemMissingFields}},
		"settleDateTarget":         {drop: []string{"settleDateTarget"}, mapped: rows},
		"settleDate":               {drop: []string{"settleDate"}, mapped: rows},
		"proceeds":                 {drop: []string{"proceeds"}, mapped: rows},
		"multiplier":               {drop: []string{"multiplier"}, mapped: rows},
		"proceeds and multiplier":  {drop: []string{"proceeds", "multiplier"}, mapped: 7, problems: []string{ProblemUnreadableRow}},
		"reportDate":               {drop: []string{"reportDate"}, mapped: rows},
		"tradeID":                  {drop: []string{"tradeID"}, mapped: rows},
		"transactionID":            {drop: []string{"transactionID"}, mapped: 7, problems: []string{ProblemMissingFields}},
		"transactionID, tradeID":   {drop: []string{"transactionID", "tradeID"}, mapped: 3, problems: []string{ProblemMissingFields, ProblemMissingFields}},
		"currency":                 {drop: []string{"currency"}, mapped: 0, problems: []string{ProblemMissingFields, ProblemMissingFields, ProblemMissingFields}},
		"quantity":                 {drop: []string{"quantity"}, mapped: 4, problems: []string{ProblemMissingFields}},
		"assetCategory":            {drop: []string{"assetCategory"}, mapped: 4, problems: []string{ProblemMissingFields}},
		"amount":                   {drop: []string{"amount"}, mapped: 7, problems: []string{ProblemMissingFields}},
		"position":                 {drop: []string{"position"}, mapped: 5, problems: []string{ProblemMissingFields}},
		"commission, taxes, net":   {drop: []string{"ibCommission", "ibCommissionCurrency", "taxes", "netCash"}, mapped: rows},
		"levelOfDetail":            {drop: []string{"levelOfDetail"}, mapped: rows},
		"positionValue, markPrice": {drop: []string{"positionValue", "markPrice"}, mapped: rows},
		"description, isin":        {drop: []string{"description", "isin"}, mapped: rows},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := base
			for _, a := range tc.drop {
				b = regexp.MustCompile(` `+a+`="[^"]*"`).ReplaceAll(b, nil)
			}
			m := mapXML(t, variantsConfig(), b)
			var codes []string
			for _, p := range m.d.GetProblems() {
				codes = append(codes, p.GetCode())
			}
			if m.tally.mapped != tc.mapped || !slices.Equal(codes, tc.problems) {
				t.Errorf("mapped %d, problems %q; want %d, %q\n%s", m.tally.mapped, codes, tc.mapped, tc.problems, render(m.d))
			}
		})
	}
}

// TestDateFormats writes one trade, one cash transaction and one position
// in every date format, separator and time format the Flex Query offers,
// and checks each is read as the same day.
func TestDateFormats(t *testing.T) {
	dates := map[string]string{ // 16 April 2026, 09:05:07, and the statement's toDate, 30 April
		"yyyyMMdd": "20260416|20260430", "yyyy-MM-dd": "2026-04-16|2026-04-30", "MM/dd/yyyy": "04/16/2026|04/30/2026",
		"MM/dd/yy": "04/16/26|04/30/26", "dd/MM/yyyy": "16/04/2026|30/04/2026", "dd/MM/yy": "16/04/26|30/04/26", "dd-MMM-yy": "16-Apr-26|30-Apr-26",
	}
	for format, pair := range dates {
		day, toDate, _ := strings.Cut(pair, "|")
		for sepName, sep := range map[string]string{"semicolon": ";", "comma": ",", "space": " ", "none": ""} {
			for _, tm := range []string{"090507", "09:05:07"} {
				t.Run(format+"/"+sepName+"/"+tm, func(t *testing.T) {
					xml := `<FlexQueryResponse><FlexStatements count="1"><FlexStatement accountId="U1234567" toDate="` + toDate + `">` +
						`<Trades><Trade currency="USD" assetCategory="STK" symbol="MSFT" transactionID="1" dateTime="` + day + sep + tm + `" quantity="1" tradePrice="400" /></Trades>` +
						`<CashTransactions><CashTransaction currency="USD" type="Dividends" transactionID="2" dateTime="` + day + sep + tm + `" amount="1" /></CashTransactions>` +
						`<OpenPositions><OpenPosition currency="USD" assetCategory="STK" symbol="MSFT" position="1" /></OpenPositions>` +
						`</FlexStatement></FlexStatements></FlexQueryResponse>`
					m := mapXML(t, testConfig(), []byte(xml))
					if len(m.d.GetProblems()) != 0 || len(m.d.GetTransactions()) != 2 {
						t.Fatalf("not every row mapped:\n%s", render(m.d))
					}
					for _, tx := range m.d.GetTransactions() {
						if tx.GetDate() != "2026-04-16" {
							t.Errorf("%s: date %s, want 2026-04-16", tx.GetSourceId(), tx.GetDate())
						}
					}
					if got := m.d.GetBalanceAssertions()[0].GetDate(); got != "2026-04-30" {
						t.Errorf("position dated %s, want the statement's toDate 2026-04-30", got)
					}
				})
			}
		}
	}
}

// TestCancellationMustReverse refuses a cancellation whose quantity has
// the same sign as the trade it cancels: booking it would hold the trade
// twice.
func TestCancellationMustReverse(t *testing.T) {
	b := readTestdata(t, "variants/corrections.xml")
	b = []byte(strings.Replace(string(b), `transactionType="TradeCancel" quantity="-10"`, `transactionType="TradeCancel" quantity="10"`, 1))
	m := mapXML(t, variantsConfig(), b)
	_, _, problems := renderAll(m.d)
	want := []string{`SEVERITY_ERROR cancellation_mismatch  FlexStatement[0]/Trades/Trade[1]: the cancellation's quantity 10 does not reverse the quantity 10 of transaction 8301; the row is left out`}
	if diff := cmp.Diff(want, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
