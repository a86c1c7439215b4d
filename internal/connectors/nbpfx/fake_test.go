package nbpfx

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNBP is a loopback HTTPS fake of NBP's table API, built from its
// documented behaviour: GET /api/exchangerates/tables/A/{start}/{end}/
// answers the tables of testdata/tables-a.json dated start..end as a JSON
// array, 404 "Brak danych" when there are none, and 400 for a range longer
// than 93 days or a malformed request.
type fakeNBP struct {
	srv    *httptest.Server
	tables map[string]json.RawMessage // effective date -> table

	mu       sync.Mutex
	requests []string // "start/end" of every request, in order
	// answer, when set, answers instead of the tables.
	answer http.HandlerFunc
}

var tablePath = regexp.MustCompile(`^/api/exchangerates/tables/A/([0-9]{4}-[0-9]{2}-[0-9]{2})/([0-9]{4}-[0-9]{2}-[0-9]{2})/$`)

func newFakeNBP(t *testing.T) *fakeNBP {
	t.Helper()
	raw, err := os.ReadFile("testdata/tables-a.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	f := &fakeNBP{tables: make(map[string]json.RawMessage)}
	for _, r := range list {
		var head struct {
			EffectiveDate string `json:"effectiveDate"`
		}
		if err := json.Unmarshal(r, &head); err != nil {
			t.Fatal(err)
		}
		f.tables[head.EffectiveDate] = r
	}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNBP) serve(w http.ResponseWriter, r *http.Request) {
	m := tablePath.FindStringSubmatch(r.URL.Path)
	f.mu.Lock()
	if m != nil {
		f.requests = append(f.requests, m[1]+"/"+m[2])
	} else {
		f.requests = append(f.requests, "bad path "+r.URL.Path)
	}
	answer := f.answer
	f.mu.Unlock()
	if answer != nil {
		answer(w, r)
		return
	}
	if m == nil || r.Method != http.MethodGet || r.URL.Query().Get("format") != "json" {
		http.Error(w, "400 BadRequest - Błędne zapytanie / Bad request", http.StatusBadRequest)
		return
	}
	start, err1 := time.Parse(time.DateOnly, m[1])
	end, err2 := time.Parse(time.DateOnly, m[2])
	switch {
	case err1 != nil || err2 != nil || end.Before(start):
		http.Error(w, "400 BadRequest - Błędny zakres dat / Invalid date range", http.StatusBadRequest)
		return
	case end.Sub(start) >= 93*24*time.Hour:
		http.Error(w, "400 BadRequest - Przekroczony limit 93 dni / Limit of 93 days has been exceeded", http.StatusBadRequest)
		return
	}
	var out []string
	for d := start; !d.After(end); d = d.AddDate(0, 0, 1) {
		if t, ok := f.tables[d.Format(time.DateOnly)]; ok {
			out = append(out, string(t))
		}
	}
	if len(out) == 0 {
		http.Error(w, "404 NotFound - Not Found - Brak danych", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write([]byte("[" + strings.Join(out, ",") + "]"))
}

// asked returns the ranges requested so far.
func (f *fakeNBP) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// serveFile makes every answer status with the content of testdata/name.
func (f *fakeNBP) serveFile(t *testing.T, status int, name string) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		w.Write(b)
	}
}

// at returns a clock stuck at the RFC 3339 time s.
func at(t *testing.T, s string) func() time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return func() time.Time { return tm }
}
