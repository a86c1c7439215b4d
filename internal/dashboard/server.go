package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Options configures a Server.
type Options struct {
	// Config is the owner's client configuration (their kubeconfig); the
	// dashboard reads with it and writes nothing.
	Config *rest.Config
	// Namespace holds the Plugins.
	Namespace string
	// Catalog is the catalog whose publishers make a plugin Verified (D-43):
	// the embedded one in the binary; tests pass their own.
	Catalog plugins.Catalog
	// ApproveCommand returns the openfief command that approves what a
	// plugin waits for; the CLI supplies it, so the page shows exactly what
	// the CLI takes.
	ApproveCommand func(name string) string
	// StatusCommand returns the openfief command that shows one plugin,
	// named by the "Needs your attention" list; the CLI supplies it, with
	// its global flags (nil: the command without them).
	StatusCommand func(name string) string
	// Approve, when set, puts an Approve button on each plugin's page that
	// asks for confirmation and then approves everything pending through it;
	// nil keeps the dashboard read-only.
	Approve ApproveFunc
	// CoreStatus, when set, reads openfief-core's owner API: each plugin's
	// page then shows its syncs or exports and rows, and the pages list the
	// data the core keeps of removed instances (OF-38). The CLI supplies it
	// with its transport and the owner's token; nil leaves the core out.
	CoreStatus CoreStatusFunc
	// CoreInterval is how often the core is asked again
	// (DefaultCoreInterval when zero): it offers no watch.
	CoreInterval time.Duration
	// PurgeCommand returns the openfief command that purges a removed
	// instance's data; the CLI supplies it, as it does ApproveCommand. The
	// dashboard has no purge button: deleting data stays a CLI action.
	PurgeCommand func(key string) string
	// Now is the clock ages are computed against; time.Now when nil.
	Now func() time.Time
}

//go:embed assets
var assets embed.FS

// Server is one run of the dashboard: the watches, the token and the pages.
type Server struct {
	opts    Options
	token   string
	ln      net.Listener
	port    int
	watches *watches
	core    *corePoll
	handler http.Handler
}

// New listens on 127.0.0.1:port (0 picks a free port) and prepares the
// server with a fresh token. Nothing is read from the cluster until Serve.
func New(opts Options, port int) (*Server, error) {
	if opts.Config == nil || opts.Namespace == "" {
		return nil, errors.New("dashboard: Config and Namespace are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	token, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("dashboard token: %w", err)
	}
	w, err := newWatches(opts.Config, opts.Namespace, opts.Catalog)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
	if err != nil {
		return nil, fmt.Errorf("dashboard: listening on 127.0.0.1:%d: %w", port, err)
	}
	s := &Server{opts: opts, token: token, ln: ln, port: ln.Addr().(*net.TCPAddr).Port, watches: w}
	s.core = newCorePoll(opts.CoreStatus, opts.CoreInterval, w.notify)
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveTable)
	mux.HandleFunc("GET /plugins/{name}", s.servePlugin)
	mux.HandleFunc("GET /removed/{key}", s.serveRemoved)
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.HandleFunc("POST /plugins/{name}/approve", s.serveApprove)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", staticOnly(http.FileServerFS(static))))
	s.handler = &access{token: token, port: s.port, allowPost: opts.Approve != nil, next: mux}
	return s, nil
}

// URL is the address to open, with the token as its first path segment;
// it is printed once, to the owner, and never logged.
func (s *Server) URL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/%s/", s.port, s.token)
}

// Handler is the server's whole HTTP surface, guarded by the token.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve starts the watches and the core's poll, serves until ctx ends and
// then shuts down. It returns an error when the cluster cannot be watched; a
// core that does not answer is shown on the pages, never an error.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.watches.start(ctx); err != nil {
		_ = s.ln.Close()
		if ctx.Err() != nil {
			return nil // stopped (Ctrl-C) before the watches synced
		}
		return err
	}
	polled := make(chan struct{})
	go func() { defer close(polled); s.core.run(ctx) }()
	defer func() { cancel(); <-polled }()
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(shutdown); err != nil {
		return srv.Close()
	}
	return nil
}

// snapshot reads the watches with the clock and the approve command.
func (s *Server) snapshot(r *http.Request) (snapshot, error) {
	snap, err := s.watches.snapshot(r.Context())
	snap.now, snap.approve, snap.status, snap.canApprove = s.opts.Now(), s.opts.ApproveCommand, s.opts.StatusCommand, s.opts.Approve != nil
	snap.core, snap.purge = s.core.current(), s.opts.PurgeCommand
	return snap, err
}

func (s *Server) serveTable(w http.ResponseWriter, r *http.Request) {
	snap, err := s.snapshot(r)
	if err != nil {
		http.Error(w, "reading the plugins: "+display.Message(err.Error()), http.StatusServiceUnavailable)
		return
	}
	render(w, http.StatusOK, snap.table())
}

func (s *Server) servePlugin(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if plugins.ValidateName(name) != nil {
		http.NotFound(w, r)
		return
	}
	snap, err := s.snapshot(r)
	if err != nil {
		http.Error(w, "reading the plugins: "+display.Message(err.Error()), http.StatusServiceUnavailable)
		return
	}
	d := snap.detail(name)
	status := http.StatusOK
	if d.Gone {
		status = http.StatusNotFound
	}
	render(w, status, d)
}

// serveRemoved shows the data openfief-core keeps of one removed instance.
func (s *Server) serveRemoved(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if !validKey(key) {
		http.NotFound(w, r)
		return
	}
	snap, err := s.snapshot(r)
	if err != nil {
		http.Error(w, "reading the plugins: "+display.Message(err.Error()), http.StatusServiceUnavailable)
		return
	}
	p := snap.removedPage(key)
	status := http.StatusOK
	if p.Gone {
		status = http.StatusNotFound
	}
	render(w, status, p)
}

// serveEvents streams the table, with ?plugin=NAME one plugin's page, or
// with ?removed=KEY a removed instance's page, as server-sent events: the
// page's live part rendered at once, then again after every change the
// watches see, or the core's poll brings, that alters it.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	name, key := r.URL.Query().Get("plugin"), r.URL.Query().Get("removed")
	if (name != "" && plugins.ValidateName(name) != nil) || (key != "" && !validKey(key)) || (name != "" && key != "") {
		http.NotFound(w, r)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	var last []byte
	for {
		changed := s.watches.wait()
		snap, err := s.snapshot(r)
		if err != nil {
			return
		}
		var v view = snap.table()
		switch {
		case name != "":
			v = snap.detail(name)
		case key != "":
			v = snap.removedPage(key)
		}
		b, err := liveUpdate(v)
		if err != nil {
			return
		}
		if string(b) != string(last) {
			fmt.Fprintf(w, "data: %s\n\n", b)
			flusher.Flush()
			last = b
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// staticOnly serves the embedded script and style sheet, never a
// directory listing or the templates.
func staticOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "app.js", "style.css":
			next.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
