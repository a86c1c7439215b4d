package webdavcsv

import (
	"strings"
	"testing"
)

// FuzzReadSequences feeds existing files to the reader: it may not panic,
// and a file it accepts must take a new row such that the result reads
// back with every sequence it held plus the new one, while the bytes it
// held stay as they were at its start.
func FuzzReadSequences(f *testing.F) {
	header := strings.Join(Header(KindFXRates), ",")
	for _, s := range []string{
		"",
		header + "\n",
		header + "\n1,nbp-fx,nbp,NBP,2026-03-30,EUR,PLN,4.2840,062/A/NBP/2026\n",
		header + "\r\n1,nbp-fx,nbp,NBP,2026-03-30,EUR,PLN,4.2840,x",
		header + "\n2,a,b,\"c\nd\",2026-03-30,EUR,PLN,'-1,\"\"\"\"\n",
		header + "\n2,a,b,c\"d,2026-03-30,EUR,PLN,1,x\n",
		"date,amount\n2026-03-01,5\n",
		"\ufeff" + header + "\n",
	} {
		f.Add([]byte(s))
	}
	r, err := recordOf(fx(1<<40, "2026-03-31", "-4.2"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		seen, err := readSequences(KindFXRates, body)
		if err != nil {
			return
		}
		out, added, err := appendRecords(KindFXRates, body, []record{r}, MaxFileBytes)
		if err != nil {
			t.Fatalf("appendRecords on an accepted file: %v", err)
		}
		if seen[r.sequence] {
			if added != 0 || out != nil {
				t.Fatalf("a row already present was added again")
			}
			return
		}
		if added != 1 || !strings.HasPrefix(string(out), string(body)) {
			t.Fatalf("added %d; the file's bytes were not kept", added)
		}
		again, err := readSequences(KindFXRates, out)
		if err != nil {
			t.Fatalf("the written file does not read back: %v\n%q", err, out)
		}
		if len(again) != len(seen)+1 || !again[r.sequence] {
			t.Fatalf("read back %d sequences, want %d plus the new one", len(again), len(seen))
		}
	})
}

// FuzzNeutralise: for any value, no fragment of the neutralised cell,
// split on any separator a spreadsheet may use, read as it is or naively
// unquoted, as a cell or as the file holds it, starts with a formula
// character, unless the value is a plain decimal, which is kept as it is.
// Neutralising only adds single quotes, and doing it twice changes nothing.
func FuzzNeutralise(f *testing.F) {
	for _, s := range append([]string{"", "-12.50", "4.2840", "=1+2", "Café =1+1", "a;-1.50", " \t =1", "a;\u200b=1"}, hostileCells...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Neutralise(in)
		if bad := formulaFragments(in, out); bad != "" {
			t.Fatalf("Neutralise(%q) = %q: %s", in, out, bad)
		}
		if strings.ReplaceAll(out, "'", "") != strings.ReplaceAll(in, "'", "") {
			t.Fatalf("Neutralise(%q) = %q: changed more than quotes", in, out)
		}
		if again := Neutralise(out); again != out {
			t.Fatalf("Neutralise(%q) = %q, but Neutralise of that = %q", in, out, again)
		}
	})
}
