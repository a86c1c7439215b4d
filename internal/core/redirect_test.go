package core

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// testTokens mints a fixed token per instance; the plugins of these tests
// check none.
type testTokens struct{}

func (testTokens) Token(_ context.Context, instance string) (string, error) {
	return "test-token-" + instance, nil
}

// urls resolves instances to the loopback servers of a test.
type urls map[string]string

func (u urls) resolve(instance string) string { return u[instance] }

// recorder is a local server that records every request it gets.
type recorder struct {
	mu   sync.Mutex
	hits []string
}

func (r *recorder) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits = append(r.hits, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		http.Error(w, "recorded", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.hits...)
}

// redirecting is a hostile plugin: it answers every call with code and
// Location to.
func redirecting(t *testing.T, code int, to string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, to, code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

var redirectCodes = []int{
	http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
	http.StatusTemporaryRedirect, http.StatusPermanentRedirect,
}

// TestCallerRefusesRedirects: a plugin that answers Sync or ImportFile with
// any redirect gets the request nowhere else: the server it names is never
// called, and the error is ErrRedirectRefused without the Location.
func TestCallerRefusesRedirects(t *testing.T) {
	for _, code := range redirectCodes {
		t.Run(http.StatusText(code), func(t *testing.T) {
			var other recorder
			to := other.serve(t) + "/elsewhere/secret-path"
			c := &Caller{Tokens: testTokens{}, Resolve: urls{"evil": redirecting(t, code, to)}.resolve}
			_, err := c.Sync(t.Context(), "evil", &connectorv1.SyncRequest{BatchId: "b1"})
			checkRedirectRefused(t, "Sync", err, code)
			_, err = c.ImportFile(t.Context(), "evil", &connectorv1.FileHeader{BatchId: "b2"}, strings.NewReader("a;b\n"))
			checkRedirectRefused(t, "ImportFile", err, code)
			if hits := other.calls(); len(hits) > 0 {
				t.Fatalf("the server the plugin named was called: %v", hits)
			}
		})
	}
	// An HTTP client the caller is given follows no redirect either.
	var other recorder
	follow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	c := &Caller{Tokens: testTokens{}, HTTP: follow, Resolve: urls{"evil": redirecting(t, http.StatusTemporaryRedirect, other.serve(t))}.resolve}
	_, err := c.Sync(t.Context(), "evil", &connectorv1.SyncRequest{BatchId: "b3"})
	checkRedirectRefused(t, "Sync with a given client", err, http.StatusTemporaryRedirect)
	if hits := other.calls(); len(hits) > 0 {
		t.Fatalf("the server the plugin named was called: %v", hits)
	}
}

func checkRedirectRefused(t *testing.T, call string, err error, code int) {
	t.Helper()
	if !errors.Is(err, ErrRedirectRefused) {
		t.Fatalf("%s: %v, want ErrRedirectRefused", call, err)
	}
	if retryable(err) {
		t.Errorf("%s: a refused redirect is retried: %v", call, err)
	}
	if msg := err.Error(); strings.Contains(msg, "elsewhere") || strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, strconv.Itoa(code)) {
		t.Errorf("%s: the error %q names the plugin's Location or address", call, msg)
	}
}

// victimConnector is a lenient connector with the accounts tier: any file
// becomes one transaction. It records every file it gets.
type victimConnector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
	mu    sync.Mutex
	files [][]byte
}

func (v *victimConnector) ImportFile(_ context.Context, stream *connect.ClientStream[connectorv1.ImportFileRequest]) (*connect.Response[connectorv1.ImportFileResponse], error) {
	var header *connectorv1.FileHeader
	var file bytes.Buffer
	for stream.Receive() {
		if h := stream.Msg().GetHeader(); h != nil {
			header = h
		}
		file.Write(stream.Msg().GetChunk())
	}
	v.mu.Lock()
	v.files = append(v.files, file.Bytes())
	v.mu.Unlock()
	return connect.NewResponse(&connectorv1.ImportFileResponse{Delivery: transactions(&connectorv1.SyncRequest{BatchId: header.GetBatchId()})}), nil
}

func (v *victimConnector) imported() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.files)
}

// TestRedirectToOwnerAPI is a regression test of a confused-deputy attack: a
// connector without data tiers answers Sync with a redirect to the core's
// own owner API, naming another connector's import. The core follows no
// redirect, so the owner API gets no request, the victim's ImportFile is
// never called and nothing is stored as the victim's.
func TestRedirectToOwnerAPI(t *testing.T) {
	victim := &victimConnector{}
	mux := http.NewServeMux()
	mux.Handle(connectorv1connect.NewConnectorServiceHandler(victim))
	victimSrv := httptest.NewServer(mux)
	t.Cleanup(victimSrv.Close)

	st := openStore(t)
	for _, code := range redirectCodes {
		t.Run(http.StatusText(code), func(t *testing.T) {
			u := urls{"victim": victimSrv.URL}
			caller := &Caller{Tokens: testTokens{}, Resolve: u.resolve}
			s := schedule(t, newFakeClock(), caller, st, SchedulerOptions{})
			s.Update([]Target{{Instance: "victim", Connector: true, DataTiers: []string{TierAccounts}}, {Instance: "evil", Connector: true}})
			c := &Core{store: st, sched: s}
			// The owner API's routes without the owner's authentication:
			// the redirect refusal must hold on its own.
			owner := httptest.NewServer(c.ownerRoutes())
			t.Cleanup(owner.Close)
			u["evil"] = redirecting(t, code, owner.URL+ownerapi.PathPluginPrefix+"victim/import")

			_, err := caller.Sync(t.Context(), "evil", &connectorv1.SyncRequest{BatchId: "b1"})
			if !errors.Is(err, ErrRedirectRefused) {
				t.Errorf("Sync: %v, want ErrRedirectRefused", err)
			}
			if n := victim.imported(); n != 0 {
				t.Errorf("the victim's ImportFile was called %d times through the owner API", n)
			}
			status, err := st.Status(t.Context(), "victim")
			if err != nil && !errors.Is(err, store.ErrUnknownInstance) {
				t.Fatal(err)
			}
			if status.Rows != (store.RowCounts{}) {
				t.Errorf("stored as the victim's: %+v", status.Rows)
			}
		})
	}
}
