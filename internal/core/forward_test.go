package core

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestImportPassedToTheHolder: an owner's import reaching a replica that
// does not serve the plugin goes, once, to the replica holding its lease,
// with the owner's token and the file; one passed on already, or one whose
// holder cannot be reached, is answered 503; one of a plugin this replica
// serves, or of none running, is left to the replica itself.
func TestImportPassedToTheHolder(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	type got struct{ path, auth, forwarded, name, body string }
	seen := make(chan got, 1)
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get(headerForwarded), r.Header.Get("X-OpenFief-File-Name"), string(b)}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"plugin":"fx","transactions":3}`)
	}))
	defer holder.Close()
	if _, ok, err := st.AcquireLease(ctx, "fx", "core-1-abc", strings.TrimPrefix(holder.URL, "http://"), time.Hour); err != nil || !ok {
		t.Fatalf("AcquireLease: %v, %v", ok, err)
	}
	l := NewLeases(LeaseOptions{Store: st, Owner: "core-0", Apply: func([]Target) {}})
	l.Update([]Target{{Instance: "fx", Connector: true}, {Instance: "mine", Connector: true}, {Instance: "gone", Connector: true}})
	l.held["mine"] = &heldLease{epoch: 1, ctx: ctx, cancel: func() {}}
	c := &Core{leases: l, store: st}

	send := func(name string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/plugins/"+name+"/import?mode=preview", strings.NewReader("date,amount\n"))
		r.Header.Set("Authorization", "Bearer owner-token")
		r.Header.Set("X-OpenFief-File-Name", "statement.csv")
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		if !c.forwardImport(w, r, name) {
			return nil
		}
		return w
	}
	w := send("fx", nil)
	if w == nil || w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"transactions":3`) {
		t.Fatalf("import of fx: %+v, want the holder's answer", w)
	}
	g := <-seen
	if g.path != "/v1/plugins/fx/import?mode=preview" || g.auth != "Bearer owner-token" || !strings.HasPrefix(g.forwarded, "core-0-") ||
		g.name != "statement.csv" || g.body != "date,amount\n" {
		t.Errorf("the holder got %+v", g)
	}
	if w := send("fx", map[string]string{headerForwarded: "core-2-def"}); w == nil || w.Code != http.StatusServiceUnavailable {
		t.Errorf("an import passed on already: %+v, want 503", w)
	}
	if send("mine", nil) != nil {
		t.Error("an import of a plugin this replica serves was passed on")
	}
	if send("nothing", nil) != nil {
		t.Error("an import of a plugin not running was passed on")
	}
	// "gone" runs, and nobody holds it (between two holders): 503.
	if w := send("gone", nil); w == nil || w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "try again") {
		t.Errorf("an import of a plugin nobody holds: %+v, want 503", w)
	}
	holder.Close()
	if w := send("fx", nil); w == nil || w.Code != http.StatusServiceUnavailable {
		t.Errorf("an import whose holder is unreachable: %+v, want 503", w)
	}
}

// TestImportNeverThroughAProxy: an import passed to the holder goes to its
// address directly even when the environment names an HTTP proxy, so the
// owner's token never reaches the proxy. The environment's proxy is read
// once per process, so the check runs in a child process of the test
// binary with HTTP_PROXY set to a listener that records what reaches it.
func TestImportNeverThroughAProxy(t *testing.T) {
	if os.Getenv("OPENFIEF_FORWARD_PROXY_CHILD") != "" {
		st := openStore(t)
		ctx := context.Background()
		// A holder's address that is not loopback (loopback is never
		// proxied) and does not resolve.
		if _, ok, err := st.AcquireLease(ctx, "fx", "core-1-abc", "holder.invalid:8081", time.Hour); err != nil || !ok {
			t.Fatalf("AcquireLease: %v, %v", ok, err)
		}
		l := NewLeases(LeaseOptions{Store: st, Owner: "core-0", Apply: func([]Target) {}})
		l.Update([]Target{{Instance: "fx", Connector: true}})
		c := &Core{leases: l, store: st}
		r := httptest.NewRequest(http.MethodPost, "/v1/plugins/fx/import", strings.NewReader("date,amount\n"))
		r.Header.Set("Authorization", "Bearer owner-token")
		w := httptest.NewRecorder()
		if !c.forwardImport(w, r, "fx") || w.Code != http.StatusServiceUnavailable {
			t.Fatalf("import of fx: %d %s, want 503 (the holder does not resolve)", w.Code, w.Body)
		}
		return
	}
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reached := make(chan string, 1)
	go func() {
		conn, err := proxy.Accept()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 4096)
		n, _ := conn.Read(b)
		reached <- string(b[:n])
	}()
	defer func() { _ = proxy.Close() }()
	cmd := exec.Command(os.Args[0], "-test.run=^TestImportNeverThroughAProxy$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OPENFIEF_FORWARD_PROXY_CHILD=1", "HTTP_PROXY=http://"+proxy.Addr().String(), "http_proxy=http://"+proxy.Addr().String(), "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	select {
	case got := <-reached:
		t.Errorf("the import went through the environment's proxy; it received %q", strings.ReplaceAll(got, "owner-token", "<token>"))
	default:
	}
	if err != nil {
		t.Fatalf("the child: %v\n%s", err, out)
	}
}

// TestRestoreRefusedBesideOtherReplicas: a restore reaching one of several
// live replicas on one database is refused with 409, naming the rule and
// the way out, before anything is paused or read; once the others are
// gone it is let through.
func TestRestoreRefusedBesideOtherReplicas(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	for _, owner := range []string{"core-0-aaa", "core-1-bbb"} {
		if err := st.Heartbeat(ctx, owner, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	l := NewLeases(LeaseOptions{Store: st, Owner: "core-0", Apply: func([]Target) {}})
	c := &Core{leases: l, store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := c.onlyReplica(ctx)
	if err == nil || !strings.Contains(err.Error(), "2 replicas of the core run") || !strings.Contains(err.Error(), "--replicas=1") {
		t.Fatalf("onlyReplica beside another replica: %v, want refused naming the rule", err)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/restore", strings.NewReader("not read"))
	w := httptest.NewRecorder()
	c.serveRestore(w, r)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "nothing was restored") {
		t.Errorf("restore beside another replica: %d %s, want 409", w.Code, w.Body)
	}
	if err := st.Depart(ctx, "core-1-bbb"); err != nil {
		t.Fatal(err)
	}
	if err := c.onlyReplica(ctx); err != nil {
		t.Errorf("onlyReplica alone: %v", err)
	}
}
