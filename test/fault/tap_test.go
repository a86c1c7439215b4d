//go:build cluster

package fault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// tap is a reverse proxy between one operator replica and the API server.
// The replica's kubeconfig names the tap's plain-HTTP loopback address; the
// tap forwards everything with the admin identity, streaming watches, and
// records every write (method, path, which plugin it is for, the body's
// hash, the API server's answer). A hook may SIGKILL the replica at its
// n-th write, either before forwarding it (the write is lost) or after the
// API server answered and before the answer reaches the replica (the write
// is done, the replica never learns).
type tap struct {
	name string
	srv  *http.Server
	addr string
	rp   *httputil.ReverseProxy

	mu     sync.Mutex
	writes []write
	// onWrite, when set, is asked about every write; it returns whether and
	// when to kill the replica, and the function that kills it.
	onWrite func(w write) (killMode, func())
}

// killMode says when a write-triggered kill happens.
type killMode int

const (
	noKill killMode = iota
	// killBefore: SIGKILL before the write reaches the API server.
	killBefore
	// killAfter: SIGKILL once the API server answered, before the replica
	// reads the answer.
	killAfter
)

func (m killMode) String() string {
	switch m {
	case killBefore:
		return "before the API server got it"
	case killAfter:
		return "after the API server applied it, before the answer reached the operator"
	}
	return "no kill"
}

// write is one write request a replica sent.
type write struct {
	at     time.Time
	method string
	path   string
	// plugins the write is for: the owner of a plugin-<name> object, the
	// Plugin itself, or the allow-list entries it sets or removes.
	plugins []string
	// resource is the API resource and name ("deployments/plugin-x").
	resource string
	lease    bool
	hash     string // SHA-256 of method, path, query and body
	status   int    // the API server's answer; 0 if it never got it
	killed   killMode
}

func (w write) String() string {
	return w.method + " " + w.resource
}

// startTap starts a tap in front of the API server cfg connects to.
func startTap(t *testing.T, name string, cfg *rest.Config) *tap {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{name: name}
	tp.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
		},
		Transport:      rt,
		FlushInterval:  -1, // watches stream
		ErrorLog:       discardLog(),
		ModifyResponse: tp.modifyResponse,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.addr = "http://" + ln.Addr().String()
	tp.srv = &http.Server{Handler: tp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tp.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = tp.srv.Close()
		<-done
	})
	return tp
}

// pending is what ServeHTTP and modifyResponse share about one write.
type pending struct {
	w    *write
	kill func()
}

type pendingKey struct{}

func (tp *tap) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		tp.rp.ServeHTTP(rw, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	w := describeWrite(r, body)

	tp.mu.Lock()
	hook := tp.onWrite
	tp.mu.Unlock()
	mode, kill := noKill, func() {}
	if hook != nil {
		mode, kill = hook(w)
	}
	w.killed = mode
	if mode == killBefore {
		kill()
		tp.record(w)
		http.Error(rw, "the replica was killed", http.StatusServiceUnavailable)
		return
	}
	pend := &pending{w: &w, kill: kill}
	r = r.WithContext(context.WithValue(r.Context(), pendingKey{}, pend))
	tp.rp.ServeHTTP(rw, r)
	tp.record(w)
}

// modifyResponse notes the API server's answer to a write, and lets a
// killAfter kill happen now: applied, but not yet answered.
func (tp *tap) modifyResponse(resp *http.Response) error {
	pend, ok := resp.Request.Context().Value(pendingKey{}).(*pending)
	if !ok {
		return nil
	}
	pend.w.status = resp.StatusCode
	if pend.w.killed == killAfter {
		pend.kill()
		return errKilled // the replica is dead; it gets a 502 it cannot read
	}
	return nil
}

func (tp *tap) record(w write) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.writes = append(tp.writes, w)
}

// setHook replaces the write hook.
func (tp *tap) setHook(h func(write) (killMode, func())) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.onWrite = h
}

// recorded returns a copy of the writes so far.
func (tp *tap) recorded() []write {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.writes)
}

// firstLeaseWrite returns the time of the first successful Lease write at
// or after since: the replica acquired or renewed the leadership then.
func (tp *tap) firstLeaseWrite(since time.Time) (time.Time, bool) {
	for _, w := range tp.recorded() {
		if w.lease && !w.at.Before(since) && w.status/100 == 2 {
			return w.at, true
		}
	}
	return time.Time{}, false
}

// describeWrite reads what a write request is for.
func describeWrite(r *http.Request, body []byte) write {
	h := sha256.New()
	_, _ = io.WriteString(h, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+"\n")
	_, _ = h.Write(body)
	w := write{at: time.Now(), method: r.Method, path: r.URL.Path, hash: hex.EncodeToString(h.Sum(nil))}

	// /api/v1/namespaces/openfief/<resource>/<name>[/<sub>] or
	// /apis/<group>/<version>/namespaces/openfief/<resource>/<name>[/<sub>]
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	i := slices.Index(parts, "namespaces")
	if i < 0 || i+2 >= len(parts) {
		w.resource = r.URL.Path
		return w
	}
	rest := parts[i+2:]
	w.resource = strings.Join(rest, "/")
	resource, name := rest[0], ""
	if len(rest) > 1 {
		name = rest[1]
	}
	switch {
	case resource == "leases" && (name == operator.LeaderElectionID || name == "" && r.Method == http.MethodPost):
		w.lease = true // a create names the Lease in the body
	case resource == "plugins" || resource == "plugingrants":
		w.plugins = []string{name}
	case resource == "configmaps" && name == plugins.AllowListConfigMap:
		var patch struct {
			Data map[string]*string `json:"data"`
		}
		if json.Unmarshal(body, &patch) == nil {
			for k := range patch.Data {
				w.plugins = append(w.plugins, k)
			}
			slices.Sort(w.plugins)
		}
	default:
		if owner, ok := strings.CutPrefix(name, "plugin-"); ok {
			w.plugins = []string{owner}
		}
	}
	return w
}
