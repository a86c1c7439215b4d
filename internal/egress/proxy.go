package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Resolver looks up the addresses of a host name; *net.Resolver implements
// it. The proxy resolves every name itself because plugins have no DNS (D-32).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens TCP connections to an address that is already an IP and
// port, so it never resolves anything; *net.Dialer implements it.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Defaults of Options.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultReviewTimeout bounds a token review twice over: the proxy's
	// wait for one request's review (Options.ReviewTimeout), and
	// CachingTokenReviewer's inner review, which goes on when the caller
	// that started it gives up, since other callers may share it.
	DefaultReviewTimeout       = 10 * time.Second
	DefaultMaxTunnelsPerPlugin = 32
	// DefaultClusterDomain is the cluster's DNS domain unless told otherwise.
	DefaultClusterDomain = "cluster.local"
	DefaultMaxTunnels    = 1024
)

// maxDialAttempts bounds how many of a name's addresses one CONNECT tries.
const maxDialAttempts = 4

// Realm is the realm of the proxy's Proxy-Authenticate challenge.
const Realm = "openfief-egress"

// Options configures a Proxy. Reviewer and AllowLists are required.
type Options struct {
	// Reviewer authenticates egress tokens (D-63); wrap it in
	// NewCachingTokenReviewer.
	Reviewer TokenReviewer
	// AllowLists gives each plugin's allowed host:port entries (D-32).
	AllowLists AllowListSource
	// Resolver resolves target names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dialer connects to checked addresses; nil means a net.Dialer that
	// checks the address once more just before connecting.
	Dialer Dialer
	// Logger receives the access log; nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the proxy's metrics; nil means unregistered ones.
	Metrics *Metrics
	// DialTimeout bounds the lookup and each connection attempt.
	DialTimeout time.Duration
	// IdleTimeout closes a tunnel after this long without a byte in either
	// direction.
	IdleTimeout time.Duration
	// ReviewTimeout bounds the token review of one request.
	ReviewTimeout time.Duration
	// MaxTunnelsPerPlugin caps one plugin's open tunnels (429 beyond).
	MaxTunnelsPerPlugin int
	// MaxTunnels caps all open tunnels (503 beyond).
	MaxTunnels int
	// ClusterDomain is the cluster's DNS domain; targets under it are
	// refused, since only the cluster's DNS answers them and a Service's
	// owner picks the answer. Empty means DefaultClusterDomain.
	ClusterDomain string
	// Splice moves a tunnel's bytes with splice(2) when both of its
	// connections are bare TCP sockets on Linux, so they never enter user
	// space; otherwise, and by default, they are read into a pooled buffer
	// and written out. Either way an idle tunnel holds no buffer and no
	// pipe. Splicing measured slower on loopback (docs/performance.md), so
	// the egress-proxy command leaves it off (OF-60).
	Splice bool
	// UnsafeAllowPrefixes exempts address ranges from the refused ones. It
	// exists for tests, which stand in for an institution on 127.0.0.1; the
	// egress-proxy command has no flag for it.
	UnsafeAllowPrefixes []netip.Prefix
}

// Proxy is the egress proxy's HTTP handler (see the package documentation).
// Serve it with an http.Server over plain HTTP/1.1; it hijacks the
// connection of every CONNECT it allows.
type Proxy struct {
	opts        Options
	log         *slog.Logger
	metrics     *Metrics
	policy      addressPolicy
	tunnels     *tunnels
	unsubscribe func()
	closing     atomic.Bool
}

// New returns a Proxy with opts, subscribed to allow-list changes so that a
// tunnel closes as soon as its host leaves its plugin's list. Call Shutdown
// to end the subscription and the tunnels.
func New(opts Options) (*Proxy, error) {
	if opts.Reviewer == nil || opts.AllowLists == nil {
		return nil, errors.New("egress proxy: Reviewer and AllowLists are required")
	}
	opts.DialTimeout = positiveOr(opts.DialTimeout, DefaultDialTimeout)
	opts.IdleTimeout = positiveOr(opts.IdleTimeout, DefaultIdleTimeout)
	opts.ReviewTimeout = positiveOr(opts.ReviewTimeout, DefaultReviewTimeout)
	opts.MaxTunnelsPerPlugin = positiveOr(opts.MaxTunnelsPerPlugin, DefaultMaxTunnelsPerPlugin)
	opts.MaxTunnels = positiveOr(opts.MaxTunnels, DefaultMaxTunnels)
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = DefaultClusterDomain
	}
	p := &Proxy{
		opts:    opts,
		log:     opts.Logger,
		metrics: opts.Metrics,
		policy:  addressPolicy{allow: opts.UnsafeAllowPrefixes},
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.metrics == nil {
		p.metrics, _ = NewMetrics(nil)
	}
	if p.opts.Resolver == nil {
		p.opts.Resolver = net.DefaultResolver
	}
	if p.opts.Dialer == nil {
		p.opts.Dialer = &net.Dialer{Control: p.checkDialAddress}
	}
	p.tunnels = newTunnels(opts.MaxTunnelsPerPlugin, opts.MaxTunnels, p.metrics)
	p.unsubscribe = opts.AllowLists.Subscribe(p.tunnels.revoke)
	return p, nil
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// checkDialAddress refuses, as a last line, a connection to an address the
// policy refuses, whatever the caller resolved.
func (p *Proxy) checkDialAddress(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress proxy: refusing to dial %q: not an IP address and port", address)
	}
	if _, why := p.policy.check(ap.Addr()); why != "" {
		return fmt.Errorf("egress proxy: refusing to dial %s: %s", address, why)
	}
	return nil
}

// OpenTunnels returns the number of open (or opening) tunnels.
func (p *Proxy) OpenTunnels() int { return p.tunnels.count() }

// Shutdown refuses new tunnels, waits for open ones to end until ctx is done,
// then closes the rest and waits for their access-log lines.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.closing.Store(true)
	// The allow-list subscription ends only once the last tunnel is gone:
	// a host revoked during the grace period closes its tunnels at once,
	// as it would outside a shutdown.
	defer p.unsubscribe()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.tunnels.count() > 0 {
		select {
		case <-ctx.Done():
			p.tunnels.closeAll(CloseShutdown)
			p.tunnels.wait()
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// accessEntry collects what the access log line of one request says.
type accessEntry struct {
	start    time.Time
	client   string
	plugin   string
	target   string
	upstream string
}

// ServeHTTP serves one proxy request: a CONNECT it allows becomes a tunnel
// for as long as it stays open; anything else is refused with a status and a
// reason.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := &accessEntry{start: time.Now(), client: r.RemoteAddr}
	if r.Method != http.MethodConnect {
		w.Header().Set("Allow", http.MethodConnect)
		p.refuse(w, e, deny(http.StatusMethodNotAllowed, ReasonMethodNotAllowed))
		return
	}
	e.target = printable(r.RequestURI, 256)
	plugin, d := p.authenticate(r.Context(), r.Header.Values("Proxy-Authorization"))
	if d != nil {
		p.refuse(w, e, d)
		return
	}
	e.plugin = plugin
	target, host, port, d := connectTarget(r.RequestURI)
	if d != nil {
		p.refuse(w, e, d)
		return
	}
	e.target = target
	if plugins.InClusterDomain(host, p.opts.ClusterDomain) {
		p.refuse(w, e, deny(http.StatusForbidden, ReasonInvalidTarget).withDetail("a name in the cluster's domain"))
		return
	}
	if !p.opts.AllowLists.AllowLists().Allows(plugin, target) {
		p.refuse(w, e, deny(http.StatusForbidden, ReasonNotAllowed))
		return
	}
	if p.closing.Load() {
		p.refuse(w, e, deny(http.StatusServiceUnavailable, ReasonShuttingDown))
		return
	}
	t, d := p.tunnels.reserve(plugin, target)
	if d != nil {
		p.refuse(w, e, d)
		return
	}
	upstream, d := p.connectUpstream(r.Context(), host, port)
	if d != nil {
		p.tunnels.release(t)
		p.refuse(w, e, d)
		return
	}
	e.upstream = upstream.RemoteAddr().String()
	p.serveTunnel(w, e, t, upstream)
}

// connectUpstream resolves host and dials one of its checked addresses.
func (p *Proxy) connectUpstream(ctx context.Context, host string, port uint16) (net.Conn, *denial) {
	addrs, d := p.resolve(ctx, host)
	if d != nil {
		return nil, d
	}
	return p.dial(ctx, addrs, port)
}

// authenticate reads and reviews the egress token and maps its username to a
// plugin (D-63).
func (p *Proxy) authenticate(ctx context.Context, header []string) (string, *denial) {
	token, err := parseProxyAuthorization(header)
	switch {
	case errors.Is(err, errNoCredentials):
		return "", deny(http.StatusProxyAuthRequired, ReasonNoCredentials)
	case err != nil:
		return "", deny(http.StatusProxyAuthRequired, ReasonBadCredentials)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReviewTimeout)
	defer cancel()
	username, err := p.opts.Reviewer.Review(ctx, token)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return "", deny(http.StatusProxyAuthRequired, ReasonUnauthenticated)
	case err != nil:
		// The error is not supposed to hold the token; make sure.
		return "", deny(http.StatusServiceUnavailable, ReasonReviewFailed).
			withDetail(strings.ReplaceAll(err.Error(), token, "[redacted]"))
	}
	plugin, ok := plugins.PluginForServiceAccount(username)
	if !ok {
		return "", deny(http.StatusForbidden, ReasonNotAPlugin).withDetail("username " + printable(username, 256))
	}
	return plugin, nil
}

// resolve looks the host up once and refuses it if any of its addresses is
// in a refused range: a name pointing partly inside the cluster is not an
// institution's. The returned addresses are the only ones dialled.
//
// The name is looked up as an absolute name (with a trailing dot), so the
// resolver never tries the pod's search domains first: with Kubernetes'
// ndots:5, "api.bank.example" would otherwise be asked as
// "api.bank.example.openfief.svc.cluster.local." before anything else, and
// whoever may create a Service named like that suffix would choose where the
// tunnel goes.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, *denial) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	found, err := p.opts.Resolver.LookupNetIP(ctx, "ip", absoluteName(host))
	if err != nil || len(found) == 0 {
		detail := "no addresses"
		if err != nil {
			detail = err.Error()
		}
		return nil, deny(http.StatusBadGateway, ReasonResolveFailed).withDetail(detail)
	}
	addrs := make([]netip.Addr, 0, len(found))
	for _, a := range found {
		checked, why := p.policy.check(a)
		if why != "" {
			return nil, deny(http.StatusForbidden, ReasonBlockedAddress).withDetail(a.String() + " is " + why)
		}
		if !containsAddr(addrs, checked) {
			addrs = append(addrs, checked)
		}
	}
	return addrs, nil
}

func containsAddr(addrs []netip.Addr, a netip.Addr) bool {
	for _, b := range addrs {
		if a == b {
			return true
		}
	}
	return false
}

// dial connects to the checked addresses in order, moving to the next when
// one fails, and never to anything else.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, *denial) {
	var errs []string
	for _, a := range addrs[:min(len(addrs), maxDialAttempts)] {
		dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
		c, err := p.opts.Dialer.DialContext(dctx, "tcp", netip.AddrPortFrom(a, port).String())
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, deny(http.StatusBadGateway, ReasonDialFailed).withDetail(strings.Join(errs, "; "))
}

// serveTunnel hijacks the client's connection, confirms the tunnel and
// hands it to a goroutine of its own that carries bytes both ways until it
// closes, then releases t. It releases t itself when the tunnel does not
// open. The handler returns once the tunnel runs, so the HTTP server's state
// for the connection (its buffers, the request) is not kept for the tunnel's
// life.
func (p *Proxy) serveTunnel(w http.ResponseWriter, e *accessEntry, t *tunnel, upstream net.Conn) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		p.tunnels.release(t)
		_ = upstream.Close() // nothing was sent on it: a failed Close loses nothing
		p.refuse(w, e, deny(http.StatusInternalServerError, CloseError).withDetail("connection cannot be hijacked"))
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		p.tunnels.release(t)
		_ = upstream.Close() // nothing was sent on it: a failed Close loses nothing
		p.logAccess(e, DecisionDeny, CloseError, http.StatusInternalServerError, err.Error(), 0, 0)
		return
	}
	// Bytes the client sent after its request (a TLS ClientHello, often) are
	// in the reader; they go upstream first. A copy, so the reader's buffer
	// is not kept.
	var buffered []byte
	if n := brw.Reader.Buffered(); n > 0 {
		peeked, _ := brw.Reader.Peek(n)
		buffered = bytes.Clone(peeked)
	}
	if d := p.tunnels.attach(t, client, upstream, p.opts.AllowLists); d != nil {
		p.tunnels.release(t)
		// The host left the list, or shutdown began, during the set-up.
		_ = client.SetWriteDeadline(time.Now().Add(p.opts.DialTimeout))
		_, _ = fmt.Fprintf(client, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
			d.status, http.StatusText(d.status), len(d.message()), d.message())
		// The refusal is written (or the client is gone); nothing was sent
		// upstream. A failed Close has no one to tell and loses nothing.
		_ = client.Close()
		_ = upstream.Close()
		p.metrics.decision(DecisionDeny, d.reason)
		p.logAccess(e, DecisionDeny, d.reason, d.status, "", 0, 0)
		return
	}
	_ = client.SetWriteDeadline(time.Now().Add(p.opts.DialTimeout))
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		t.close(CloseError)
	}
	_ = client.SetWriteDeadline(time.Time{})
	p.metrics.decision(DecisionAllow, ReasonAllowed)
	p.metrics.open.Inc()
	p.log.LogAttrs(context.Background(), slog.LevelDebug, "egress tunnel opened",
		slog.String("plugin", e.plugin), slog.String("target", e.target),
		slog.String("decision", DecisionAllow), slog.String("reason", ReasonAllowed),
		slog.String("client", e.client), slog.String("upstream", e.upstream))

	go func() {
		defer p.tunnels.release(t)
		up, down, reason := t.pipe(buffered, p.opts.IdleTimeout, p.opts.Splice, p.metrics)
		p.metrics.open.Dec()
		p.metrics.closes.WithLabelValues(reason).Inc()
		p.metrics.duration.Observe(time.Since(e.start).Seconds())
		p.logAccess(e, DecisionAllow, reason, http.StatusOK, "", up, down)
	}()
}

// refuse answers a refused request and logs it.
func (p *Proxy) refuse(w http.ResponseWriter, e *accessEntry, d *denial) {
	h := w.Header()
	if d.status == http.StatusProxyAuthRequired {
		h.Set("Proxy-Authenticate", `Basic realm="`+Realm+`"`)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Connection", "close")
	w.WriteHeader(d.status)
	_, _ = io.WriteString(w, d.message())
	p.metrics.decision(DecisionDeny, d.reason)
	p.logAccess(e, DecisionDeny, d.reason, d.status, d.detail, 0, 0)
}

// logAccess writes the one access-log line of a refusal or of a closed
// tunnel. It holds no token and no header.
func (p *Proxy) logAccess(e *accessEntry, decision, reason string, status int, detail string, up, down int64) {
	attrs := []slog.Attr{
		slog.String("plugin", e.plugin),
		slog.String("target", e.target),
		slog.String("decision", decision),
		slog.String("reason", reason),
		slog.Int("status", status),
		slog.String("client", e.client),
		slog.Int64("bytes_up", up),
		slog.Int64("bytes_down", down),
		slog.Duration("duration", time.Since(e.start)),
	}
	if e.upstream != "" {
		attrs = append(attrs, slog.String("upstream", e.upstream))
	}
	if detail != "" {
		attrs = append(attrs, slog.String("detail", printable(detail, 512)))
	}
	p.log.LogAttrs(context.Background(), slog.LevelInfo, "egress", attrs...)
}

// printable cuts s to n bytes and replaces anything but printable ASCII, so
// a client-chosen string cannot forge log lines.
func printable(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, s)
}

// absoluteName returns host with the trailing dot that makes a resolver take
// it as fully qualified.
func absoluteName(host string) string {
	if strings.HasSuffix(host, ".") {
		return host
	}
	return host + "."
}
