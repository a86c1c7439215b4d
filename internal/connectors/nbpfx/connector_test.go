package nbpfx

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// newTestConnector returns a connector for cfg reaching fake, with the
// clock at now (RFC 3339).
func newTestConnector(t *testing.T, fake *fakeNBP, cfg Config, now string) *Connector {
	t.Helper()
	cfg.BaseURL = fake.srv.URL
	c, err := New(cfg, WithHTTPClient(fake.srv.Client()), WithClock(at(t, now)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func doSync(t *testing.T, c *Connector, watermark string) (*connectorv1.Delivery, error) {
	t.Helper()
	resp, err := c.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-1", Watermark: watermark}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetDelivery(), nil
}

// rates writes a delivery's rates as "date base rate ref" lines.
func rates(d *connectorv1.Delivery) []string {
	var out []string
	for _, r := range d.GetFxRates() {
		if r.GetQuoteCurrency() != "PLN" {
			out = append(out, "quote is not PLN: "+r.String())
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", r.GetDate(), r.GetBaseCurrency(), r.GetRate(), r.GetSourceRef()))
	}
	return out
}

func problems(d *connectorv1.Delivery) []string {
	var out []string
	for _, p := range d.GetProblems() {
		out = append(out, fmt.Sprintf("%s %s %s: %s", p.GetSeverity(), p.GetCode(), p.GetLocation(), p.GetMessage()))
	}
	return out
}

func TestSync(t *testing.T) {
	eurUSD := Config{Currencies: []string{"EUR", "USD"}}
	tests := map[string]struct {
		cfg           Config
		now           string
		watermark     string
		wantRequests  []string
		wantRates     []string
		wantProblems  []string
		wantWatermark string
	}{
		"weekend after Friday's table: Monday's table only": {
			cfg: eurUSD, now: "2026-03-30T13:00:00Z", watermark: "2026-03-27",
			wantRequests:  []string{"2026-03-28/2026-03-30"},
			wantRates:     []string{"2026-03-30 EUR 4.2845 062/A/NBP/2026", "2026-03-30 USD 3.7666 062/A/NBP/2026"},
			wantWatermark: "2026-03-30",
		},
		"weekend with no table yet: 404 keeps the watermark": {
			cfg: eurUSD, now: "2026-03-29T23:59:59Z", watermark: "2026-03-27",
			wantRequests:  []string{"2026-03-28/2026-03-29"},
			wantWatermark: "2026-03-27",
		},
		"Easter Monday, a holiday without a table: 404 keeps the watermark": {
			cfg: eurUSD, now: "2026-04-06T18:00:00Z", watermark: "2026-04-03",
			wantRequests:  []string{"2026-04-04/2026-04-06"},
			wantWatermark: "2026-04-03",
		},
		"over Easter: Tuesday's table after Good Friday's": {
			cfg: Config{Currencies: []string{"EUR"}}, now: "2026-04-07T12:30:00Z", watermark: "2026-04-02",
			wantRequests:  []string{"2026-04-03/2026-04-07"},
			wantRates:     []string{"2026-04-03 EUR 4.2849 066/A/NBP/2026", "2026-04-07 EUR 4.2840 067/A/NBP/2026"},
			wantWatermark: "2026-04-07",
		},
		"first sync from startDate; rates exactly as published": {
			cfg: Config{Currencies: []string{"EUR", "XDR", "HUF"}, StartDate: "2026-03-30"}, now: "2026-03-31T20:00:00Z",
			wantRequests: []string{"2026-03-30/2026-03-31"},
			wantRates: []string{
				"2026-03-30 EUR 4.2845 062/A/NBP/2026", "2026-03-30 HUF 0.011014 062/A/NBP/2026", "2026-03-30 XDR 5.1036 062/A/NBP/2026",
				// NBP's trailing zero kept; more digits than a float64 holds, all kept.
				"2026-03-31 EUR 4.2840 063/A/NBP/2026", "2026-03-31 HUF 0.011015 063/A/NBP/2026", "2026-03-31 XDR 5.123456789012345678 063/A/NBP/2026",
			},
			wantWatermark: "2026-03-31",
		},
		"first sync without startDate asks for the last 93 days": {
			cfg: Config{Currencies: []string{"CHF"}}, now: "2026-03-26T15:00:00Z",
			wantRequests:  []string{"2025-12-24/2026-03-26"},
			wantRates:     []string{"2026-03-26 CHF 4.5012 060/A/NBP/2026"},
			wantWatermark: "2026-03-26",
		},
		"a long range is split into ranges of at most 93 days": {
			cfg: Config{Currencies: []string{"JPY"}, StartDate: "2025-10-01"}, now: "2026-03-27T23:00:00Z",
			wantRequests: []string{"2025-10-01/2026-01-01", "2026-01-02/2026-03-27"},
			wantRates:    []string{"2026-03-26 JPY 0.025171 060/A/NBP/2026", "2026-03-27 JPY 0.025172 061/A/NBP/2026"},
			// The first range has no table (404); the second has two.
			wantWatermark: "2026-03-27",
		},
		"every currency when the config names none": {
			now: "2026-04-08T12:00:00Z", watermark: "2026-04-07",
			wantRequests: []string{"2026-04-08/2026-04-08"},
			wantRates: []string{
				"2026-04-08 CHF 4.5010 068/A/NBP/2026", "2026-04-08 EUR 4.2841 068/A/NBP/2026", "2026-04-08 HUF 0.011010 068/A/NBP/2026",
				"2026-04-08 JPY 0.025179 068/A/NBP/2026", "2026-04-08 USD 3.7662 068/A/NBP/2026", "2026-04-08 XDR 5.1032 068/A/NBP/2026",
			},
			wantWatermark: "2026-04-08",
		},
		"a currency NBP does not publish is a warning": {
			cfg: Config{Currencies: []string{"GBP", "USD"}}, now: "2026-04-08T12:00:00Z", watermark: "2026-04-07",
			wantRequests:  []string{"2026-04-08/2026-04-08"},
			wantRates:     []string{"2026-04-08 USD 3.7662 068/A/NBP/2026"},
			wantProblems:  []string{"SEVERITY_WARNING currency_not_published : NBP's table A has no usable rate for GBP on any day this sync read"},
			wantWatermark: "2026-04-08",
		},
		"watermark today: nothing to ask": {
			cfg: eurUSD, now: "2026-04-08T23:00:00Z", watermark: "2026-04-08",
			wantWatermark: "2026-04-08",
		},
		"watermark in the future: nothing to ask, watermark kept": {
			cfg: eurUSD, now: "2026-04-08T23:00:00Z", watermark: "2026-05-01",
			wantWatermark: "2026-05-01",
		},
		"today is the UTC day, not the local one": {
			cfg: eurUSD, now: "2026-04-08T01:30:00+02:00", watermark: "2026-04-06",
			wantRequests:  []string{"2026-04-07/2026-04-07"},
			wantRates:     []string{"2026-04-07 EUR 4.2840 067/A/NBP/2026", "2026-04-07 USD 3.7661 067/A/NBP/2026"},
			wantWatermark: "2026-04-07",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFakeNBP(t)
			c := newTestConnector(t, fake, tc.cfg, tc.now)
			d, err := doSync(t, c, tc.watermark)
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if diff := cmp.Diff(tc.wantRequests, fake.asked()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRates, rates(d)); diff != "" {
				t.Errorf("rates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantProblems, problems(d)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if d.GetWatermark() != tc.wantWatermark {
				t.Errorf("watermark = %q, want %q", d.GetWatermark(), tc.wantWatermark)
			}
			if d.GetBatchId() != "batch-1" || d.GetInstitution().GetId() != "nbp" {
				t.Errorf("batch %q institution %v", d.GetBatchId(), d.GetInstitution())
			}
			if err := delivery.Validate(d); err != nil {
				t.Errorf("delivery breaks the contract: %v", err)
			}
		})
	}
}

// TestSyncCatchesUp checks that a first sync from an early start date reads
// at most maxRangesWithData ranges with tables, and the next sync goes on
// from its watermark.
func TestSyncCatchesUp(t *testing.T) {
	fake := newFakeNBP(t)
	days := map[string]bool{}
	// One table in each of 9 ranges of 93 days from 2024-01-01, plus the fixture's.
	start := civilDay(at(t, "2024-01-01T00:00:00Z")())
	for i := range 9 {
		d := delivery.Date(start.AddDate(0, 0, 93*i+5))
		days[d] = true
		fake.tables[d] = []byte(`{"table":"A","no":"` + fmt.Sprintf("%03d", i+1) + `/A/NBP/2024","effectiveDate":"` + d + `","rates":[{"currency":"euro","code":"EUR","mid":4.3}]}`)
	}
	c := newTestConnector(t, fake, Config{Currencies: []string{"EUR"}, StartDate: "2024-01-01"}, "2026-04-08T20:00:00Z")
	d, err := doSync(t, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(d.GetFxRates()); got != maxRangesWithData {
		t.Errorf("first sync delivered %d rates, want %d (one per range)", got, maxRangesWithData)
	}
	if want := delivery.Date(start.AddDate(0, 0, 93*7+5)); d.GetWatermark() != want {
		t.Errorf("watermark = %q, want %q", d.GetWatermark(), want)
	}
	for _, r := range d.GetFxRates() {
		delete(days, r.GetDate())
	}
	d2, err := doSync(t, c, d.GetWatermark())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range d2.GetFxRates() {
		delete(days, r.GetDate())
	}
	if len(days) != 0 || d2.GetWatermark() != "2026-04-08" {
		t.Errorf("after two syncs, missing %v, watermark %q", days, d2.GetWatermark())
	}
}

func TestSyncErrors(t *testing.T) {
	tests := map[string]struct {
		status    int
		file      string
		watermark string
		batchID   string
		closed    bool
		wantCode  connect.Code
		wantMsg   string
	}{
		"NBP fails with 500":                       {status: 500, file: "malformed-truncated.json", wantCode: connect.CodeUnavailable, wantMsg: "500"},
		"NBP is overloaded (503)":                  {status: 503, file: "malformed-truncated.json", wantCode: connect.CodeUnavailable},
		"a 404 that is not NBP's no-data answer":   {status: 404, file: "outside-range.json", wantCode: connect.CodeUnavailable, wantMsg: "404"},
		"NBP refuses the query (400)":              {status: 400, file: "outside-range.json", wantCode: connect.CodeUnavailable},
		"NBP cannot be reached":                    {closed: true, wantCode: connect.CodeUnavailable, wantMsg: "reach NBP"},
		"truncated JSON":                           {status: 200, file: "malformed-truncated.json", wantCode: connect.CodeInvalidArgument, wantMsg: "unreadable NBP answer"},
		"a table dated outside the range":          {status: 200, file: "outside-range.json", wantCode: connect.CodeInvalidArgument, wantMsg: "outside the range"},
		"a table other than A":                     {status: 200, file: "table-b.json", wantCode: connect.CodeInvalidArgument, wantMsg: `"B", not A`},
		"a watermark that is not a date":           {watermark: "2026-02-30", wantCode: connect.CodeInvalidArgument, wantMsg: "watermark"},
		"a watermark in another format":            {watermark: "20260330", wantCode: connect.CodeInvalidArgument, wantMsg: "watermark"},
		"no batch ID":                              {batchID: "-", wantCode: connect.CodeInvalidArgument},
		"NBP answers an object instead of a list":  {status: 200, file: "object.json", wantCode: connect.CodeInvalidArgument},
		"NBP answers two tables for the same date": {status: 200, file: "same-date.json", wantCode: connect.CodeInvalidArgument, wantMsg: "two tables"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFakeNBP(t)
			if tc.file != "" {
				fake.serveFile(t, tc.status, tc.file)
			}
			c := newTestConnector(t, fake, Config{}, "2026-03-31T20:00:00Z")
			if tc.closed {
				fake.srv.Close()
			}
			watermark := tc.watermark
			if watermark == "" {
				watermark = "2026-03-30"
			}
			batch := "batch-1"
			if tc.batchID == "-" {
				batch = ""
			}
			_, err := c.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: batch, Watermark: watermark}))
			if got := connect.CodeOf(err); got != tc.wantCode {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.wantCode)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
}

func TestSyncCanceled(t *testing.T) {
	fake := newFakeNBP(t)
	c := newTestConnector(t, fake, Config{}, "2026-03-31T20:00:00Z")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Sync(ctx, connect.NewRequest(&connectorv1.SyncRequest{BatchId: "b", Watermark: "2026-03-30"}))
	if got := connect.CodeOf(err); got != connect.CodeCanceled {
		t.Errorf("code = %v (%v), want Canceled", got, err)
	}
}

func TestSyncTooLargeAnswer(t *testing.T) {
	fake := newFakeNBP(t)
	fake.answer = func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("[" + strings.Repeat(" ", maxBodyBytes) + "]"))
	}
	c := newTestConnector(t, fake, Config{}, "2026-03-31T20:00:00Z")
	_, err := doSync(t, c, "2026-03-30")
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("err = %v, want InvalidArgument", err)
	}
}

// TestSyncBadRows checks that unreadable rows become problems while the
// rest of the table is delivered exactly.
func TestSyncBadRows(t *testing.T) {
	fake := newFakeNBP(t)
	fake.serveFile(t, 200, "bad-rows.json")
	c := newTestConnector(t, fake, Config{}, "2026-03-31T20:00:00Z")
	d, err := doSync(t, c, "2026-03-30")
	if err != nil {
		t.Fatal(err)
	}
	wantRates := []string{"2026-03-31 CZK 0.17 063/A/NBP/2026", "2026-03-31 EUR 4.2840 063/A/NBP/2026"}
	if diff := cmp.Diff(wantRates, rates(d)); diff != "" {
		t.Errorf("rates (-want +got):\n%s", diff)
	}
	wantProblems := []string{
		`SEVERITY_ERROR unreadable_rate table 2026-03-31 rates[1]: currency code "usd" is not an ISO 4217 code other than PLN; the rate is left out`,
		`SEVERITY_ERROR unreadable_rate table 2026-03-31 rates[2]: mid rate of CHF "-4.5" is not a positive decimal; the rate is left out`,
		`SEVERITY_ERROR unreadable_rate table 2026-03-31 rates[3]: mid rate of HUF "\"n/a\"" is not a positive decimal; the rate is left out`,
		`SEVERITY_ERROR unreadable_rate table 2026-03-31 rates[4]: mid rate of JPY "" is not a positive decimal; the rate is left out`,
		`SEVERITY_ERROR unreadable_rate table 2026-03-31 rates[5]: currency code "PLN" is not an ISO 4217 code other than PLN; the rate is left out`,
		`SEVERITY_ERROR unreadable_rate table 2026-03-31 rates[6]: EUR appears twice in the table; the second rate is left out`,
	}
	if diff := cmp.Diff(wantProblems, problems(d)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if d.GetWatermark() != "2026-03-31" {
		t.Errorf("watermark = %q", d.GetWatermark())
	}
}

// TestSyncDeterministic checks that the same answer gives the same delivery.
func TestSyncDeterministic(t *testing.T) {
	fake := newFakeNBP(t)
	c := newTestConnector(t, fake, Config{StartDate: "2026-03-26"}, "2026-04-08T20:00:00Z")
	a, err := doSync(t, c, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := doSync(t, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b, protocmp.Transform()); diff != "" {
		t.Errorf("two syncs differ (-first +second):\n%s", diff)
	}
	if len(a.GetFxRates()) != 9*6 {
		t.Errorf("%d rates, want 54", len(a.GetFxRates()))
	}
}

func TestImportFileUnimplemented(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ImportFile(context.Background(), nil)
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("ImportFile: %v, want Unimplemented", err)
	}
}

func TestNoHTTPClient(t *testing.T) {
	c, err := New(Config{}, WithClock(at(t, "2026-03-31T20:00:00Z")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = doSync(t, c, "2026-03-30")
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("err = %v, want Unavailable", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		cfg     Config
		wantErr string
	}{
		"empty":                   {},
		"everything":              {cfg: Config{BaseURL: "https://api.nbp.pl/", Currencies: []string{"EUR", "USD"}, StartDate: "2002-01-02"}},
		"base URL with a port":    {cfg: Config{BaseURL: "https://nbp.test:8443"}},
		"plain http":              {cfg: Config{BaseURL: "http://api.nbp.pl"}, wantErr: "baseURL: must be an https URL"},
		"a path":                  {cfg: Config{BaseURL: "https://api.nbp.pl/api"}, wantErr: "baseURL: must not have a path"},
		"a query":                 {cfg: Config{BaseURL: "https://api.nbp.pl?x=1"}, wantErr: "baseURL: must not have a path"},
		"user info":               {cfg: Config{BaseURL: "https://u:p@api.nbp.pl"}, wantErr: "baseURL: must not carry user info"},
		"no host":                 {cfg: Config{BaseURL: "https://"}, wantErr: "baseURL: has no host"},
		"lower-case currency":     {cfg: Config{Currencies: []string{"eur"}}, wantErr: `currencies[0]: "eur" is not`},
		"PLN":                     {cfg: Config{Currencies: []string{"PLN"}}, wantErr: "currencies[0]: PLN is the quote currency"},
		"repeated currency":       {cfg: Config{Currencies: []string{"EUR", "EUR"}}, wantErr: "currencies[1]: EUR appears more than once"},
		"start date not a date":   {cfg: Config{StartDate: "2026-13-01"}, wantErr: "startDate"},
		"start date before NBP's": {cfg: Config{StartDate: "2001-12-31"}, wantErr: "startDate: NBP's API starts on 2002-01-02"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if _, err := New(tc.cfg); err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want %q", err, tc.wantErr)
			}
			if _, err := New(tc.cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
}

// TestExactDecimals checks that rates stay exact end to end: 0.1 and 0.2
// read from NBP's JSON add up to exactly 0.3, and digits beyond a float64's
// precision survive.
func TestExactDecimals(t *testing.T) {
	tables, err := parseTables([]byte(`[{"table":"A","no":"063/A/NBP/2026","effectiveDate":"2026-03-31","rates":[` +
		`{"code":"AAA","mid":0.1},{"code":"BBB","mid":0.2},{"code":"CCC","mid":0.30000000000000004441},{"code":"DDD","mid":1.5e-3}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	b := delivery.NewBuilder("b", Institution)
	if err := newCollector(b, nil).add(tables, "2026-03-31", "2026-03-31"); err != nil {
		t.Fatal(err)
	}
	d, err := b.Build("2026-03-31")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range d.GetFxRates() {
		got[r.GetBaseCurrency()] = r.GetRate()
	}
	want := map[string]string{"AAA": "0.1", "BBB": "0.2", "CCC": "0.30000000000000004441", "DDD": "0.0015"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rates (-want +got):\n%s", diff)
	}
	sum := delivery.MustDecimal(got["AAA"]).Add(delivery.MustDecimal(got["BBB"]))
	if sum.String() != "0.3" {
		t.Errorf("0.1 + 0.2 = %s, want 0.3", sum)
	}
	if sum.Cmp(delivery.MustDecimal(got["CCC"])) == 0 {
		t.Error("0.3 equals 0.30000000000000004441: precision was lost")
	}
}

func TestParseTablesErrors(t *testing.T) {
	for _, in := range []string{``, `null`, `{}`, `[] []`, `[{"table":"A","effectiveDate":"2026-3-31"}]`, `[{"table":"A"}]`, `[1]`} {
		if _, err := parseTables([]byte(in)); !errors.Is(err, errUnreadable) {
			t.Errorf("parseTables(%q) = %v, want errUnreadable", in, err)
		}
	}
	if tables, err := parseTables([]byte(`[]`)); err != nil || len(tables) != 0 {
		t.Errorf("parseTables([]) = %v, %v", tables, err)
	}
}
