package ibkrflex

import (
	"os"
	"path/filepath"
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

// FuzzMapping feeds Flex statements, seeded with every variant in
// testdata/variants, to the mapping and checks what must hold for any
// statement it reads: no panic, a delivery that keeps the contract, every
// transaction balanced, every row it must account for either mapped or
// left out with a problem, and problems of bounded length.
func FuzzMapping(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "variants", "*.xml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no variants: %v", err)
	}
	for _, name := range append(files, filepath.Join("testdata", "statement.xml")) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	cfg := variantsConfig()
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := readStatement(b)
		if err != nil {
			return
		}
		db := delivery.NewBuilder("batch", Institution)
		n := mapStatement(cfg, db, st)
		d, err := db.Build("")
		if err != nil {
			t.Fatalf("accepted statement builds an invalid delivery: %v", err)
		}
		checkInvariants(t, st, n, d)
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
