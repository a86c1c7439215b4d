package webdavcsv

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
)

var (
	nbp  = &connectorv1.Institution{Id: "nbp", Name: "Narodowy Bank Polski"}
	ibkr = &connectorv1.Institution{Id: "ibkr", Name: "Interactive Brokers"}
	vwce = &connectorv1.Instrument{Isin: "IE00BK5BQT80", Symbol: "VWCE", Exchange: "XETR", Currency: "EUR", Name: "Vanguard FTSE All-World"}
)

func fx(seq uint64, date, rate string) *viewv1.Entry {
	return &viewv1.Entry{Sequence: seq, Source: "nbp-fx", Institution: nbp, Entry: &viewv1.Entry_FxRate{FxRate: &connectorv1.FxRate{
		Date: date, BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: rate, SourceRef: "062/A/NBP/2026",
	}}}
}

// page1 is a first export: every kind, FX rates of two months, and a
// transaction whose text fields a spreadsheet would run as formulas.
func page1() []*viewv1.Entry {
	return []*viewv1.Entry{
		fx(1, "2026-03-30", "4.2840"),
		fx(2, "2026-04-01", "4.2781"),
		{Sequence: 3, Source: "ibkr", Institution: ibkr, Entry: &viewv1.Entry_Price{Price: &connectorv1.Price{
			Instrument: vwce, Date: "2026-03-31", Price: "117.66", Currency: "EUR",
		}}},
		{Sequence: 4, Source: "gus", Institution: &connectorv1.Institution{Id: "gus", Name: "GUS"}, Entry: &viewv1.Entry_IndexReading{IndexReading: &connectorv1.IndexReading{
			IndexId: "gus.cpi.yoy", Date: "2026-03-01", Value: "-0.3", Name: "CPI y/y",
		}}},
		{Sequence: 5, Source: "ibkr", Institution: ibkr, Entry: &viewv1.Entry_Transaction{Transaction: &connectorv1.Transaction{
			SourceId: "cash:2003", Date: "2026-03-03", Description: `=HYPERLINK("http://evil.example","fee")`, Payee: "+48 600 100 200",
			Postings: []*connectorv1.Posting{
				{AccountId: "ibkr-usd", Amount: "-1.50", Currency: "USD"},
				{AccountId: "expense-fees", Amount: "1.50", Currency: "USD", Memo: "-fee"},
			},
		}}},
		{Sequence: 6, Source: "ibkr", Institution: ibkr, Entry: &viewv1.Entry_BalanceAssertion{BalanceAssertion: &connectorv1.BalanceAssertion{
			AccountId: "ibkr-securities", Date: "2026-03-31", Amount: "590.1", Currency: "EUR", Instrument: vwce, Quantity: "5",
		}}},
	}
}

// wantFiles are the files page1 writes, relative to the folder.
var wantFiles = map[string]string{
	"2026/2026-03-fx-rates.csv": "sequence,source,institution,institution_name,date,base_currency,quote_currency,rate,source_ref\n" +
		"1,nbp-fx,nbp,Narodowy Bank Polski,2026-03-30,EUR,PLN,4.2840,062/A/NBP/2026\n",
	"2026/2026-04-fx-rates.csv": "sequence,source,institution,institution_name,date,base_currency,quote_currency,rate,source_ref\n" +
		"2,nbp-fx,nbp,Narodowy Bank Polski,2026-04-01,EUR,PLN,4.2781,062/A/NBP/2026\n",
	"2026/2026-03-prices.csv": "sequence,source,institution,institution_name,date,isin,symbol,exchange,instrument_currency,instrument_name,price,currency\n" +
		"3,ibkr,ibkr,Interactive Brokers,2026-03-31,IE00BK5BQT80,VWCE,XETR,EUR,Vanguard FTSE All-World,117.66,EUR\n",
	"2026/2026-03-index-readings.csv": "sequence,source,institution,institution_name,date,index_id,value,name\n" +
		"4,gus,gus,GUS,2026-03-01,gus.cpi.yoy,-0.3,CPI y/y\n",
	"2026/2026-03-transactions.csv": "sequence,source,institution,institution_name,source_id,date,value_date,description,payee,posting,account_id,amount,currency,isin,symbol,exchange,instrument_currency,instrument_name,quantity,memo\n" +
		`5,ibkr,ibkr,Interactive Brokers,cash:2003,2026-03-03,,"'=HYPERLINK(""http://evil.example"",""fee"")",'+48 600 100 200,1,ibkr-usd,-1.50,USD,,,,,,,` + "\n" +
		`5,ibkr,ibkr,Interactive Brokers,cash:2003,2026-03-03,,"'=HYPERLINK(""http://evil.example"",""fee"")",'+48 600 100 200,2,expense-fees,1.50,USD,,,,,,,'-fee` + "\n",
	"2026/2026-03-balances.csv": "sequence,source,institution,institution_name,date,account_id,amount,currency,isin,symbol,exchange,instrument_currency,instrument_name,quantity\n" +
		"6,ibkr,ibkr,Interactive Brokers,2026-03-31,ibkr-securities,590.1,EUR,IE00BK5BQT80,VWCE,XETR,EUR,Vanguard FTSE All-World,5\n",
}

// files returns every file of wantFiles' names as the server holds it.
func (h *harness) files(t *testing.T) map[string]string {
	t.Helper()
	got := map[string]string{}
	for name := range wantFiles {
		if s, ok := h.dav.read(folderPath + name); ok {
			got[name] = s
		}
	}
	return got
}

// count returns how many logged requests start with prefix ("PUT ").
func count(log []string, prefix string) int {
	n := 0
	for _, l := range log {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestExport: the first page creates the folder, the year folder and one
// file per month and kind with the right rows; the same page again (an OK
// the core did not receive) writes nothing; a second page appends its new
// entries in sequence order after the rows already there.
func TestExport(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	if err := h.core.export(t, page1()...); err != nil {
		t.Fatalf("Export: %v", err)
	}
	if diff := cmp.Diff(wantFiles, h.files(t)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	log := h.dav.log()
	written := 0
	for _, l := range log {
		if strings.HasPrefix(l, "PUT ") && strings.HasSuffix(l, " 201") {
			written++
		}
	}
	if written != len(wantFiles) {
		t.Errorf("%d files written, want %d: %v", written, len(wantFiles), log)
	}
	if !slices.Contains(log, "MKCOL "+folderPath+" 201") || !slices.Contains(log, "MKCOL "+folderPath+"2026/ 201") {
		t.Errorf("the folder and its year folder were not created: %v", log)
	}

	if err := h.core.export(t, page1()...); err != nil {
		t.Fatalf("Export again: %v", err)
	}
	if diff := cmp.Diff(wantFiles, h.files(t)); diff != "" {
		t.Errorf("files after the same page again (-want +got):\n%s", diff)
	}
	if log := h.dav.log(); count(log, "PUT ") != 0 || count(log, "MKCOL ") != 0 {
		t.Errorf("the same page again wrote: %v", log)
	}

	// The second page repeats entry 1, and carries 9 before 7.
	if err := h.core.export(t, fx(9, "2026-03-31", "4.2901"), fx(1, "2026-03-30", "4.2840"), fx(7, "2026-03-31", "4.2900")); err != nil {
		t.Fatalf("Export page 2: %v", err)
	}
	want := wantFiles["2026/2026-03-fx-rates.csv"] +
		"7,nbp-fx,nbp,Narodowy Bank Polski,2026-03-31,EUR,PLN,4.2900,062/A/NBP/2026\n" +
		"9,nbp-fx,nbp,Narodowy Bank Polski,2026-03-31,EUR,PLN,4.2901,062/A/NBP/2026\n"
	if got, _ := h.dav.read(folderPath + "2026/2026-03-fx-rates.csv"); got != want {
		t.Errorf("after page 2:\n%s\nwant:\n%s", got, want)
	}
	if log := h.dav.log(); count(log, "PUT ") != 1 {
		t.Errorf("page 2 wrote other files: %v", log)
	}
}

// TestExportKinds: with kinds set, entries of other kinds are acknowledged
// and not written; a page of only those reaches no server.
func TestExportKinds(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{Kinds: []string{"fx-rates"}})
	if err := h.core.export(t, page1()[2:]...); err != nil {
		t.Fatalf("Export: %v", err)
	}
	if log := h.dav.log(); len(log) != 0 {
		t.Errorf("a page of kinds not configured reached the server: %v", log)
	}
	if err := h.core.export(t, page1()...); err != nil {
		t.Fatalf("Export: %v", err)
	}
	got := h.files(t)
	if len(got) != 2 || got["2026/2026-03-fx-rates.csv"] != wantFiles["2026/2026-03-fx-rates.csv"] {
		t.Errorf("files %v, want the two FX files only", slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		}))
	}
}

// TestExportWithoutToken: a call without the core's token never reaches
// the view.
func TestExportWithoutToken(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	h.core.token = "not-a-token"
	if err := h.core.export(t, page1()...); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Export: %v, want Unauthenticated", err)
	}
	if log := h.dav.log(); len(log) != 0 {
		t.Errorf("the server was reached: %v", log)
	}
}

// TestExportCredentials: without the Secret's files, or with a password
// the server refuses, Export fails as FailedPrecondition naming the folder
// and never the password, and writes nothing; the Secret is read on every
// call, so a corrected password applies to the next call.
func TestExportCredentials(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	h.view.credsDir = writeCredentials(t, davUser, "")
	err := h.core.export(t, page1()...)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "password") {
		t.Errorf("without the password file: %v, want FailedPrecondition naming the password file", err)
	}
	if log := h.dav.log(); len(log) != 0 {
		t.Errorf("the server was reached without credentials: %v", log)
	}

	h.dav.setPassword("the-new-password")
	h.view.credsDir = h.creds
	err = h.core.export(t, page1()...)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("with a refused password: %v, want FailedPrecondition", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "https://"+davHost+":"+h.dav.port()+folderPath) ||
		!strings.Contains(msg, "401") || strings.Contains(msg, davPassword) {
		t.Errorf("message %q: want the folder and the status, never the password", msg)
	}
	if log := h.dav.log(); count(log, "PUT ") != 0 || len(h.files(t)) != 0 {
		t.Errorf("wrote with refused credentials: %v", log)
	}

	// The owner updates the Secret; the kubelet rewrites the file.
	h.view.credsDir = writeCredentials(t, davUser, "the-new-password")
	if err := h.core.export(t, page1()...); err != nil {
		t.Fatalf("after the Secret was updated: %v", err)
	}
	if diff := cmp.Diff(wantFiles, h.files(t)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// TestExportHostNotAllowed: a folder on a host the owner did not approve
// is refused by the egress proxy; the server sees nothing.
func TestExportHostNotAllowed(t *testing.T) {
	h := setup(t, otherHost, folderPath, Config{})
	err := h.core.export(t, page1()...)
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("Export: %v, want Unavailable", err)
	}
	if log := h.dav.log(); len(log) != 0 {
		t.Errorf("the server was reached through the proxy: %v", log)
	}
}

// TestExportRedirectNotFollowed: a server that answers a redirect is not
// followed to where it points, and the page fails.
func TestExportRedirectNotFollowed(t *testing.T) {
	h := setup(t, davHost, "/moved/", Config{})
	err := h.core.export(t, page1()...)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("Export: %v, want FailedPrecondition about the redirect", err)
	}
	for _, l := range h.dav.log() {
		if !strings.HasPrefix(l, "GET /moved/") {
			t.Errorf("request %q: the redirect was followed", l)
		}
	}
	if len(h.files(t)) != 0 {
		t.Error("a file was written")
	}
}

// TestExportOversizedFile: an existing file larger than MaxFileBytes is
// refused, not read past the limit and not overwritten.
func TestExportOversizedFile(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	name := folderPath + "2026/2026-03-fx-rates.csv"
	big := append([]byte(Header(KindFXRates)[0]+strings.Repeat(",x", 8)+"\n"), bytes.Repeat([]byte("1,a,b,c,d,e,f,g,h\n"), MaxFileBytes/18+1)...)
	h.dav.write(name, big)
	err := h.core.export(t, page1()...)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), fmt.Sprint(MaxFileBytes)) {
		t.Errorf("Export: %v, want FailedPrecondition naming the limit", err)
	}
	if got, _ := h.dav.read(name); len(got) != len(big) {
		t.Errorf("the file now holds %d bytes, want the %d it held", len(got), len(big))
	}
}

// TestExportForeignFile: a file whose header is not the view's is refused
// and left as it is, and so is one with a broken row.
func TestExportForeignFile(t *testing.T) {
	for name, content := range map[string]string{
		"another header":  "date,amount\n2026-03-01,5\n",
		"renamed columns": "sequence,source,institution,institution_name,date,base,quote,rate,ref\n1,nbp-fx,nbp,NBP,2026-03-30,EUR,PLN,4.2840,x\n",
		"a broken row":    wantFiles["2026/2026-03-fx-rates.csv"] + "2,nbp-fx,nbp\n",
		"a bare quote":    wantFiles["2026/2026-03-fx-rates.csv"] + `2,nbp-fx,nbp,N"BP,2026-03-31,EUR,PLN,1,x` + "\n",
		"no sequence":     wantFiles["2026/2026-03-fx-rates.csv"] + "x,nbp-fx,nbp,NBP,2026-03-31,EUR,PLN,1,x\n",
	} {
		t.Run(name, func(t *testing.T) {
			h := setup(t, davHost, folderPath, Config{})
			file := folderPath + "2026/2026-03-fx-rates.csv"
			h.dav.write(file, []byte(content))
			err := h.core.export(t, fx(11, "2026-03-31", "4.3"))
			if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "not a file this view writes") {
				t.Errorf("Export: %v, want FailedPrecondition: not a file this view writes", err)
			}
			if got, _ := h.dav.read(file); got != content {
				t.Errorf("the file was changed to %q", got)
			}
			if log := h.dav.log(); count(log, "PUT ") != 0 {
				t.Errorf("wrote: %v", log)
			}
		})
	}
}

// TestExportAnotherWriter: when another writer changes the file between
// the view's GET and its PUT, the server refuses the PUT (If-Match), the
// view reads the file again and keeps the other writer's row. Without
// If-Match the other row would be lost.
func TestExportAnotherWriter(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	if err := h.core.export(t, fx(1, "2026-03-30", "4.2840")); err != nil {
		t.Fatal(err)
	}
	name := folderPath + "2026/2026-03-fx-rates.csv"
	other := "5,nbp-fx-2,nbp,Narodowy Bank Polski,2026-03-31,USD,PLN,3.9,063/A/NBP/2026\n"
	h.dav.beforePut = func() {
		s, _ := h.dav.read(name)
		h.dav.write(name, []byte(s+other))
	}
	h.dav.log()
	if err := h.core.export(t, fx(7, "2026-03-31", "4.29")); err != nil {
		t.Fatalf("Export: %v", err)
	}
	want := wantFiles["2026/2026-03-fx-rates.csv"] + other + "7,nbp-fx,nbp,Narodowy Bank Polski,2026-03-31,EUR,PLN,4.29,062/A/NBP/2026\n"
	if got, _ := h.dav.read(name); got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	if log := h.dav.log(); !slices.Contains(log, "PUT "+name+" 412") {
		t.Errorf("no PUT was refused: %v", log)
	}
}

// TestExportTwoViews: two view instances writing the same files at the
// same time, each page sent again until it is kept (as the core does),
// lose no row.
func TestExportTwoViews(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	second, err := New(h.view.cfg, WithHTTPClient(h.view.client), WithCredentialsDir(h.creds))
	if err != nil {
		t.Fatal(err)
	}
	c2 := serveView(t, second)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, c := range []*core{h.core, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 10 {
				seq := uint64(100*(i+1) + n)
				for try := 0; ; try++ {
					err := c.export(t, fx(seq, "2026-03-31", "4.3"))
					if err == nil {
						break
					}
					if connect.CodeOf(err) != connect.CodeUnavailable || try > 20 {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, _ := h.dav.read(folderPath + "2026/2026-03-fx-rates.csv")
	seen, err := readSequences(KindFXRates, []byte(got))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		for n := range 10 {
			if !seen[uint64(100*(i+1)+n)] {
				t.Errorf("row %d was lost", 100*(i+1)+n)
			}
		}
	}
	if len(seen) != 20 {
		t.Errorf("%d rows, want 20", len(seen))
	}
	t.Logf("%d writes were refused as concurrent (412)", count412(h.dav.log()))
}

// TestExportRefusesUnfileableEntry: an entry without a kind or with a
// date that is not YYYY-MM-DD refuses the whole page before anything is
// written.
func TestExportRefusesUnfileableEntry(t *testing.T) {
	h := setup(t, davHost, folderPath, Config{})
	for name, e := range map[string]*viewv1.Entry{
		"no kind":  {Sequence: 20, Source: "x"},
		"bad date": fx(21, "2026-3-31", "4.3"),
	} {
		err := h.core.export(t, fx(1, "2026-03-30", "4.2840"), e)
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if log := h.dav.log(); len(log) != 0 {
		t.Errorf("the server was reached: %v", log)
	}
	var ce *connect.Error
	if err := h.core.export(t, fx(21, "2026-3-31", "4.3")); !errors.As(err, &ce) || !strings.Contains(ce.Message(), "entry 21") {
		t.Errorf("the error does not name the entry: %v", err)
	}
}

// count412 counts the PUTs the server refused with 412.
func count412(log []string) int {
	n := 0
	for _, l := range log {
		if strings.HasPrefix(l, "PUT ") && strings.HasSuffix(l, " 412") {
			n++
		}
	}
	return n
}
