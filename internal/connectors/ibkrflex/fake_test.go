package ibkrflex

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

const (
	testToken = "123456789012345678901234"
	testQuery = "987654"
	testRef   = "5432109876"
)

// fakeFlex is a loopback HTTPS fake of the Flex Web Service (version 3),
// built from its documented behaviour: SendRequest?t=TOKEN&q=QUERY&v=3
// answers a reference code, GetStatement?t=TOKEN&q=REFCODE&v=3 answers
// error 1019 ("generation in progress") notReady times, then the statement.
// A wrong token is error 1015, a wrong query 1014, a wrong reference 1017.
type fakeFlex struct {
	srv       *httptest.Server
	statement []byte

	mu       sync.Mutex
	token    string
	notReady int
	sends    int
	gets     int
	// sendAnswer, when set, answers SendRequest instead.
	sendAnswer http.HandlerFunc
	// getAnswer, when set, answers GetStatement instead.
	getAnswer http.HandlerFunc
}

func newFakeFlex(t *testing.T) *fakeFlex {
	t.Helper()
	f := &fakeFlex{statement: readTestdata(t, "statement.xml"), token: testToken}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS errors some tests cause on purpose
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flexError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.Write([]byte(`<FlexStatementResponse timestamp="01 April, 2026 08:30 AM EDT"><Status>Fail</Status><ErrorCode>` + code + `</ErrorCode><ErrorMessage>` + msg + `</ErrorMessage></FlexStatementResponse>`))
}

func (f *fakeFlex) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("User-Agent") == "" || q.Get("v") != "3" {
		flexError(w, "1020", "Invalid request or unable to validate request.")
		return
	}
	switch r.URL.Path {
	case "/AccountManagement/FlexWebService/SendRequest":
		f.sends++
		switch {
		case f.sendAnswer != nil:
			f.sendAnswer(w, r)
		case q.Get("t") != f.token:
			flexError(w, "1015", "Token is invalid.")
		case q.Get("q") != testQuery:
			flexError(w, "1014", "Query is invalid.")
		default:
			w.Write([]byte(`<FlexStatementResponse timestamp="01 April, 2026 08:30 AM EDT"><Status>Success</Status><ReferenceCode>` + testRef + `</ReferenceCode><Url>https://ndcdyn.interactivebrokers.com/AccountManagement/FlexWebService/GetStatement</Url></FlexStatementResponse>`))
		}
	case "/AccountManagement/FlexWebService/GetStatement":
		f.gets++
		switch {
		case f.getAnswer != nil:
			f.getAnswer(w, r)
		case q.Get("t") != f.token:
			flexError(w, "1015", "Token is invalid.")
		case q.Get("q") != testRef:
			flexError(w, "1017", "Reference code is invalid.")
		case f.gets <= f.notReady:
			w.Write([]byte(`<FlexStatementResponse timestamp="01 April, 2026 08:30 AM EDT"><Status>Warn</Status><ErrorCode>1019</ErrorCode><ErrorMessage>Statement generation in progress. Please try again shortly.</ErrorMessage></FlexStatementResponse>`))
		default:
			w.Header().Set("Content-Type", "text/xml")
			w.Write(f.statement)
		}
	default:
		http.NotFound(w, r)
	}
}

// answerFile makes a handler that answers status with testdata/name.
func answerFile(t *testing.T, status int, name string) http.HandlerFunc {
	b := readTestdata(t, name)
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		w.Write(b)
	}
}

// writeCredentials writes the Secret's files into a new directory.
func writeCredentials(t *testing.T, token, query string) string {
	t.Helper()
	dir := t.TempDir()
	if token != "" {
		if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if query != "" {
		if err := os.WriteFile(filepath.Join(dir, "query-id"), []byte(query), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testConfig maps U1234567 with USD and EUR cash and every category.
func testConfig() Config {
	return Config{
		Accounts: map[string]Account{
			"U1234567": {Cash: map[string]string{"USD": "ibkr-usd", "EUR": "ibkr-eur"}, Securities: "ibkr-securities"},
		},
		Categories: Categories{
			Dividends: "income-dividends", WithholdingTax: "expense-withholding-tax", Interest: "income-interest",
			Fees: "expense-fees", Commissions: "expense-commissions", Transfers: "transfers", FXConversion: "fx-conversion",
		},
	}
}
