package nbpfx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// maxBodyBytes bounds one NBP answer. A 93-day range of table A is about
// 150 KB; anything far larger is not NBP's answer.
const maxBodyBytes = 8 << 20

// table is one NBP exchange rate table as its JSON API writes it:
//
//	[{"table":"A","no":"063/A/NBP/2026","effectiveDate":"2026-03-31",
//	  "rates":[{"currency":"dolar amerykański","code":"USD","mid":3.7664}, ...]}]
//
// Mid rates are for one unit of the currency. A mid rate is read as the
// JSON number's exact text (json.Number), never a float.
type table struct {
	Table         string `json:"table"`
	No            string `json:"no"`
	EffectiveDate string `json:"effectiveDate"`
	Rates         []rate `json:"rates"`
}

// rate is one row of a table. Mid stays raw until the row is mapped, so one
// unreadable row does not make the whole answer unreadable.
type rate struct {
	Currency string          `json:"currency"`
	Code     string          `json:"code"`
	Mid      json.RawMessage `json:"mid"`
}

// midRate reads a row's mid rate exactly: a JSON number, through
// json.Number and the SDK's decimal parser, never a float.
func midRate(raw json.RawMessage) (delivery.Decimal, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return delivery.Decimal{}, err
	}
	return delivery.ParseNumber(n.String())
}

// tableNo is the shape of NBP's table number, such as "063/A/NBP/2026",
// delivered as an FxRate's source_ref when it matches.
var tableNo = regexp.MustCompile(`^[0-9]{1,3}/A/NBP/[0-9]{4}$`)

// errUnreadable is wrapped by every error about an answer nbp-fx cannot
// read; Sync maps it to connect.CodeInvalidArgument.
var errUnreadable = errors.New("unreadable NBP answer")

// parseTables reads an NBP tables answer: a JSON array of table A objects,
// each with a real YYYY-MM-DD effective date. Unknown fields are ignored, as
// NBP may add some; numbers keep their exact text. Rows are checked later,
// one by one, by mapTables.
func parseTables(b []byte) ([]table, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tables []table
	if err := dec.Decode(&tables); err != nil {
		return nil, fmt.Errorf("%w: %v", errUnreadable, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the JSON array", errUnreadable)
	}
	if tables == nil {
		return nil, fmt.Errorf("%w: not a JSON array", errUnreadable)
	}
	for i, t := range tables {
		if t.Table != "A" {
			return nil, fmt.Errorf("%w: table %d is %q, not A", errUnreadable, i, truncate(t.Table))
		}
		if !delivery.IsDate(t.EffectiveDate) {
			return nil, fmt.Errorf("%w: table %d: effectiveDate %q is not a YYYY-MM-DD date", errUnreadable, i, truncate(t.EffectiveDate))
		}
	}
	return tables, nil
}

// Problem codes nbp-fx reports (D-49).
const (
	// ProblemUnreadableRate: a row of a table has no ISO 4217 code or no
	// positive decimal mid rate; it is left out.
	ProblemUnreadableRate = "unreadable_rate"
	// ProblemCurrencyNotPublished: a currency the config asks for is in none
	// of the tables the sync read.
	ProblemCurrencyNotPublished = "currency_not_published"
)

// collector maps the tables of one sync into a Builder.
type collector struct {
	b *delivery.Builder
	// want holds the currencies the config asks for; empty means all.
	want map[string]bool
	// seen holds the currencies delivered so far.
	seen map[string]bool
	// dates holds the effective dates of the tables read so far.
	dates map[string]bool
	// latest is the latest effective date read so far, or "".
	latest string
}

func newCollector(b *delivery.Builder, currencies []string) *collector {
	c := &collector{b: b, want: make(map[string]bool), seen: make(map[string]bool), dates: make(map[string]bool)}
	for _, code := range currencies {
		c.want[code] = true
	}
	return c
}

// add maps tables, which NBP sent for the days from..to (YYYY-MM-DD,
// inclusive): every rate of a wanted currency becomes an FxRate. A table
// dated outside from..to, or two tables for one day, make the answer
// unreadable; a bad row is an ingest problem and is left out.
func (c *collector) add(tables []table, from, to string) error {
	for _, t := range tables {
		d := t.EffectiveDate
		if d < from || d > to {
			return fmt.Errorf("%w: table for %s outside the range asked for, %s to %s", errUnreadable, d, from, to)
		}
		if c.dates[d] {
			return fmt.Errorf("%w: two tables for %s", errUnreadable, d)
		}
		c.dates[d] = true
		c.latest = max(c.latest, d)
		ref := ""
		if tableNo.MatchString(t.No) {
			ref = t.No
		}
		codes := make(map[string]bool, len(t.Rates))
		for j, r := range t.Rates {
			loc := fmt.Sprintf("table %s rates[%d]", d, j)
			if !delivery.IsCurrency(r.Code) || r.Code == "PLN" {
				c.b.Error(ProblemUnreadableRate, loc, "currency code %q is not an ISO 4217 code other than PLN; the rate is left out", truncate(r.Code))
				continue
			}
			if len(c.want) > 0 && !c.want[r.Code] {
				continue
			}
			if codes[r.Code] {
				c.b.Error(ProblemUnreadableRate, loc, "%s appears twice in the table; the second rate is left out", r.Code)
				continue
			}
			codes[r.Code] = true
			mid, err := midRate(r.Mid)
			if err != nil || mid.Sign() <= 0 {
				c.b.Error(ProblemUnreadableRate, loc, "mid rate of %s %q is not a positive decimal; the rate is left out", r.Code, truncate(string(r.Mid)))
				continue
			}
			c.seen[r.Code] = true
			c.b.FxRate(&connectorv1.FxRate{Date: d, BaseCurrency: r.Code, QuoteCurrency: "PLN", Rate: mid.String(), SourceRef: ref})
		}
	}
	return nil
}

// finish warns about every wanted currency that no table read carried, as
// long as some table was read.
func (c *collector) finish() {
	if c.latest == "" {
		return
	}
	for _, code := range slices.Sorted(maps.Keys(c.want)) {
		if !c.seen[code] {
			c.b.Warn(ProblemCurrencyNotPublished, "", "NBP's table A has no usable rate for %s on any day this sync read", code)
		}
	}
}

// truncate shortens outside input quoted in a message and makes it valid
// UTF-8, which protobuf strings must be.
func truncate(s string) string {
	const n = 40
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "..."
	}
	return s
}
