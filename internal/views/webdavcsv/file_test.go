package webdavcsv

import (
	"errors"
	"strings"
	"testing"
)

// TestReadSequences: what an existing file may hold, and what makes it a
// file the view did not write.
func TestReadSequences(t *testing.T) {
	header := strings.Join(Header(KindIndexReadings), ",") + "\n"
	for name, tc := range map[string]struct {
		body string
		want []uint64
	}{
		"empty":                       {"", nil},
		"header only":                 {header, nil},
		"rows":                        {header + "4,gus,gus,GUS,2026-03-01,gus.cpi.yoy,-0.3,CPI\n9,gus,gus,GUS,2026-03-01,x,1,\n", []uint64{4, 9}},
		"CRLF and no final line feed": {strings.ReplaceAll(header, "\n", "\r\n") + "4,gus,gus,GUS,2026-03-01,x,1,", []uint64{4}},
		"quoted cells":                {header + `4,gus,gus,"G,U""S",2026-03-01,x,1,"a` + "\n" + `b"` + "\n", []uint64{4}},
	} {
		seen, err := readSequences(KindIndexReadings, []byte(tc.body))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(seen) != len(tc.want) {
			t.Errorf("%s: %v, want %v", name, seen, tc.want)
		}
		for _, s := range tc.want {
			if !seen[s] {
				t.Errorf("%s: %d missing from %v", name, s, seen)
			}
		}
	}
	for name, body := range map[string]string{
		"another kind's header": strings.Join(Header(KindFXRates), ",") + "\n",
		"a byte order mark":     "\ufeff" + header,
		"a short row":           header + "4,gus,gus\n",
		"a long row":            header + "4,gus,gus,GUS,2026-03-01,x,1,,extra\n",
		"a bare quote":          header + `4,gus,gus,G"US,2026-03-01,x,1,` + "\n",
		"an open quote":         header + `4,gus,gus,"GUS,2026-03-01,x,1,` + "\n",
		"a quoted sequence":     header + `'4,gus,gus,GUS,2026-03-01,x,1,` + "\n",
		"a negative sequence":   header + `-4,gus,gus,GUS,2026-03-01,x,1,` + "\n",
		"a sequence too large":  header + `18446744073709551616,gus,gus,GUS,2026-03-01,x,1,` + "\n",
		"an empty sequence":     header + `,gus,gus,GUS,2026-03-01,x,1,` + "\n",
		"HTML":                  "<html><body>login</body></html>\n",
	} {
		if _, err := readSequences(KindIndexReadings, []byte(body)); !errors.Is(err, errForeign) {
			t.Errorf("%s: %v, want errForeign", name, err)
		}
	}
}

// TestAppendRecordsLimit: a file that would outgrow the limit is refused,
// so the view never writes a file it could not read back.
func TestAppendRecordsLimit(t *testing.T) {
	r, err := recordOf(fx(1, "2026-03-30", "4.2840"))
	if err != nil {
		t.Fatal(err)
	}
	out, added, err := appendRecords(KindFXRates, nil, []record{r}, 1<<10)
	if err != nil || added != 1 {
		t.Fatalf("appendRecords: %d, %v", added, err)
	}
	if _, _, err := appendRecords(KindFXRates, nil, []record{r}, len(out)-1); !errors.Is(err, errTooLarge) {
		t.Errorf("one byte less: %v, want errTooLarge", err)
	}
}
