package nbpfx

import (
	"os"
	"testing"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// FuzzParseTables feeds NBP answers to the parser and the mapping: neither
// may panic, and whatever they accept must build a delivery that keeps the
// contract (exact decimals, dates, currencies), with every latest date
// inside the range asked for.
func FuzzParseTables(f *testing.F) {
	for _, name := range []string{"tables-a.json", "bad-rows.json", "malformed-truncated.json", "outside-range.json", "table-b.json", "object.json", "same-date.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`[{"table":"A","no":"1/A/NBP/2026","effectiveDate":"2026-03-31","rates":[{"code":"EUR","mid":1e-100},{"code":"USD","mid":-0}]}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tables, err := parseTables(b)
		if err != nil {
			return
		}
		db := delivery.NewBuilder("batch", Institution)
		c := newCollector(db, []string{"EUR", "USD"})
		if err := c.add(tables, "2026-01-01", "2026-12-31"); err != nil {
			return
		}
		c.finish()
		if c.latest != "" && (c.latest < "2026-01-01" || c.latest > "2026-12-31") {
			t.Fatalf("latest %q outside the range", c.latest)
		}
		if _, err := db.Build(c.latest); err != nil {
			t.Fatalf("accepted input builds an invalid delivery: %v", err)
		}
		all := newCollector(delivery.NewBuilder("batch", Institution), nil)
		if err := all.add(tables, "2026-01-01", "2026-12-31"); err == nil {
			if _, err := all.b.Build(all.latest); err != nil {
				t.Fatalf("accepted input builds an invalid delivery: %v", err)
			}
		}
	})
}
