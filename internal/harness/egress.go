package harness

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// standInAddr is the address every host the plugin asks the proxy for
// resolves to: a documentation address (RFC 5737) the proxy is told to
// allow, which the harness's dialer answers itself. Nothing leaves the
// machine.
var standInAddr = netip.MustParseAddr("192.0.2.1")

// egressRecord is what the plugin asked the egress proxy: the hosts the
// proxy let through (it resolves only those) and the refusals it logged.
type egressRecord struct {
	mu      sync.Mutex
	allowed []string
	denied  []denial
}

// denial is one CONNECT the proxy refused: its target and reason, cleaned.
type denial struct{ target, reason string }

func (r *egressRecord) snapshot() (allowed []string, denied []denial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.allowed), slices.Clone(r.denied)
}

const maxEgressRecords = 100

func (r *egressRecord) add(list *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(*list) < maxEgressRecords && !slices.Contains(*list, s) {
		*list = append(*list, s)
	}
}

// LookupNetIP implements egress.Resolver: it records the host, which the
// proxy resolves only once its allow-list admitted it.
func (r *egressRecord) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.add(&r.allowed, strings.TrimSuffix(host, "."))
	return []netip.Addr{standInAddr}, nil
}

// DialContext implements egress.Dialer: the stand-in for every host reads
// the first bytes the plugin sends (its TLS ClientHello) and closes, so no
// institution is ever reached and the plugin sees a failed handshake.
func (r *egressRecord) DialContext(context.Context, string, string) (net.Conn, error) {
	proxySide, standIn := net.Pipe()
	go func() {
		_ = standIn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = standIn.Read(make([]byte, 16<<10))
		_ = standIn.Close()
	}()
	return proxySide, nil
}

// Handle records the proxy's refusals from its access log.
func (r *egressRecord) Handle(_ context.Context, rec slog.Record) error {
	var decision, target, reason string
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "decision":
			decision = a.Value.String()
		case "target":
			target = a.Value.String()
		case "reason":
			reason = a.Value.String()
		}
		return true
	})
	if decision == egress.DecisionDeny {
		r.mu.Lock()
		if len(r.denied) < maxEgressRecords {
			r.denied = append(r.denied, denial{target: clean(target, 120), reason: clean(reason, 60)})
		}
		r.mu.Unlock()
	}
	return nil
}

func (r *egressRecord) Enabled(context.Context, slog.Level) bool { return true }
func (r *egressRecord) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *egressRecord) WithGroup(string) slog.Handler            { return r }

// tokenReviewer accepts the one egress token the harness minted for the
// plugin, as the cluster's TokenReview would, naming the plugin's
// ServiceAccount.
type tokenReviewer struct{ token, username string }

func (t tokenReviewer) Review(_ context.Context, token string) (string, error) {
	if token != t.token {
		return "", egress.ErrUnauthenticated
	}
	return t.username, nil
}

// startProxy serves the project's egress proxy (internal/egress) on ln with
// the plugin's allow-list, its token reviewer and the recording stand-ins.
func startProxy(ln net.Listener, instance string, allow []string, egressToken string, rec *egressRecord) (stop func(), err error) {
	lists := &egress.AllowListStore{}
	lists.Set(plugins.AllowLists{instance: allow})
	p, err := egress.New(egress.Options{
		Reviewer:            tokenReviewer{token: egressToken, username: plugins.ServiceAccountUsername(instance)},
		AllowLists:          lists,
		Resolver:            rec,
		Dialer:              rec,
		Logger:              slog.New(rec),
		UnsafeAllowPrefixes: []netip.Prefix{netip.PrefixFrom(standInAddr, 32)},
	})
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: egress.ReadHeaderTimeout, MaxHeaderBytes: egress.MaxHeaderBytes}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		_ = srv.Close()
	}, nil
}
