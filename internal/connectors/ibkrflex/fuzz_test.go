package ibkrflex

import (
	"testing"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// FuzzStatement feeds Flex XML to the parser and the mapping: neither may
// panic, and a statement they accept must build a delivery that keeps the
// contract, with balanced transactions (Build reports imbalance as a
// problem; none may appear).
func FuzzStatement(f *testing.F) {
	for _, name := range []string{"statement.xml", "statement-truncated.xml", "token-expired.xml", "in-progress.xml", "html.html"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte(`<FlexQueryResponse><FlexStatements><FlexStatement accountId="U1234567"><Trades><Trade tradeID="1" currency="USD" assetCategory="CASH" symbol="EUR.USD" tradeDate="20260101" quantity="1e2" proceeds="-1.1E2" ibCommission="-0" /></Trades></FlexStatement></FlexStatements></FlexQueryResponse>`))
	cfg := testConfig()
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := readStatement(b)
		if err != nil {
			return
		}
		db := delivery.NewBuilder("batch", Institution)
		mapStatement(cfg, db, st)
		d, err := db.Build("")
		if err != nil {
			t.Fatalf("accepted statement builds an invalid delivery: %v", err)
		}
		for _, p := range d.GetProblems() {
			if p.GetCode() == delivery.ProblemUnbalanced {
				t.Fatalf("mapped an unbalanced transaction: %s", p.GetMessage())
			}
		}
	})
}

// FuzzStatus feeds Flex Web Service answers to the status parser.
func FuzzStatus(f *testing.F) {
	for _, name := range []string{"send-request-success.xml", "token-expired.xml", "in-progress.xml", "too-many-requests.xml", "html.html"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseStatus(b)
		if err != nil {
			return
		}
		_ = statusError("SendRequest", s, []string{testToken})
		_, _ = rootName(b)
	})
}
