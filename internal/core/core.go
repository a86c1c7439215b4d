package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/core/auth"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Defaults of Options.
const (
	// DefaultServiceAccount is the core's ServiceAccount: the subject every
	// plugin requires in the core's tokens (D-59).
	DefaultServiceAccount = "openfief-core"
	// DefaultPluginAddr is where plugins reach the core (the Service's
	// "plugins" port, the operator's CorePodPort).
	DefaultPluginAddr = ":8080"
	// DefaultOwnerAddr serves the owner API, reached through the API
	// server's service proxy with the owner's token (docs/core.md, OF-18).
	DefaultOwnerAddr = ":8081"
	// FlagPreMigrationBackupDir is the binary's flag that sets
	// Options.PreMigrationBackupDir, which errors name.
	FlagPreMigrationBackupDir = "pre-migration-backup-dir"
	// DefaultDSN is the SQLite file on the core's volume.
	DefaultDSN = "/var/lib/openfief-core/core.db"
	// shutdownGrace is how long calls in flight may finish on shutdown.
	shutdownGrace = 10 * time.Second
)

// Options configures the core; cmd/openfief-core fills it from flags and
// `openfief dev` in code.
type Options struct {
	// Namespace is where the Plugins and the core's ServiceAccount are.
	Namespace string
	// ServiceAccount is the core's own, whose tokens call plugins.
	ServiceAccount string
	// DSN is postgres://... for PostgreSQL or a SQLite file path. Store, if
	// set, is used instead (tests).
	DSN   string
	Store Store
	// PluginAddr and OwnerAddr are the two listeners; "127.0.0.1:0" picks a
	// free port (Core.PluginAddr and Core.OwnerAddr tell which).
	PluginAddr, OwnerAddr string
	// MetricsAddr, when set, serves the core's Prometheus metrics at
	// /metrics, without authentication like the operator's: the core's
	// NetworkPolicy admits only the scraper deploy/monitoring names
	// (Core.MetricsAddr tells the port).
	MetricsAddr string
	// PluginPort is the port plugins serve on (the operator's Topology).
	PluginPort int
	// Resolve replaces the plugin Service address (the local mode and the
	// tests point it at a local process).
	Resolve Resolver
	// Scheduler's settings; its Store and Connector are set by Start.
	Scheduler SchedulerOptions
	// Views' settings; its Exporter and Store are set by Start.
	Views ViewOptions
	// PreMigrationBackupDir is where the core writes the backup it takes
	// before migrating a record that holds data (store.OpenOptions): empty
	// means beside a SQLite file, and refuses to migrate PostgreSQL.
	PreMigrationBackupDir string
	// TokenCacheTTL is auth.Options.CacheTTL.
	TokenCacheTTL time.Duration
	// KubeAPIQPS and KubeAPIBurst limit the core's client of the API server
	// (the tokens it calls plugins with, the reviews of theirs); zero means
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Replica names this replica in the store's leases (the pod's name);
	// LeaseTTL and LeaseRenew are LeaseOptions' TTL and Renew. Leases are
	// kept whenever the store is PostgreSQL, so that any number of replicas
	// share the instances; a SQLite store is one replica's and keeps none.
	Replica              string
	LeaseTTL, LeaseRenew time.Duration
	// ReplicaAddress is where other replicas reach this one's owner API
	// (the pod's IP and the owner port); empty means an owner's import
	// reaching a replica that does not serve the plugin is refused with
	// 503, to be tried again, instead of passed on.
	ReplicaAddress string
	Log            *slog.Logger
}

// DefaultOptions returns the Options the binary starts from.
func DefaultOptions() Options {
	return Options{
		Namespace: plugins.Namespace, ServiceAccount: DefaultServiceAccount, DSN: DefaultDSN,
		PluginAddr: DefaultPluginAddr, OwnerAddr: DefaultOwnerAddr, PluginPort: plugins.DefaultPluginPort,
		Scheduler: SchedulerOptions{DefaultInterval: DefaultSyncInterval},
	}
}

// Core is a running openfief-core (OF-8): the Plugin watch, the scheduler,
// the plugin API behind token verification and the owner API.
type Core struct {
	store   Store
	closeDB func() error
	sched   *Scheduler
	views   *Views
	plugins *Plugins
	log     *slog.Logger
	// gate pauses the workers while a restore runs (backup.go).
	gate gate
	// leases, on PostgreSQL, share the instances among the replicas
	// (leases.go); nil on SQLite. leasesDone is closed when they are
	// released on shutdown.
	leases     *Leases
	leasesDone chan struct{}

	pluginLn, ownerLn, metricsLn net.Listener
	servers                      []*http.Server
	cancel                       context.CancelFunc
	done                         chan struct{}
}

// Start opens the store, starts watching Plugins, the scheduler and both
// listeners, and returns once the first list of Plugins is in. cfg is the
// core's identity at the API server: it needs get, list and watch on
// plugins, create on serviceaccounts/token of its own ServiceAccount and
// create on tokenreviews (deploy/core), with which it verifies both the
// plugins' tokens and the owner's (OF-18).
func Start(ctx context.Context, cfg *rest.Config, o Options) (c *Core, err error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	def := DefaultOptions()
	if o.Namespace == "" {
		o.Namespace = def.Namespace
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = def.ServiceAccount
	}
	if o.PluginPort == 0 {
		o.PluginPort = def.PluginPort
	}
	if o.Resolve == nil {
		o.Resolve = ServiceResolver(o.Namespace, o.PluginPort)
	}
	cs, err := kubernetes.NewForConfig(coreClientConfig(cfg, o.KubeAPIQPS, o.KubeAPIBurst))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c = &Core{log: o.Log, cancel: cancel, done: make(chan struct{}), store: o.Store, closeDB: func() error { return nil }}
	defer func() {
		if err != nil {
			cancel()
			_ = c.closeDB()
			for _, ln := range []net.Listener{c.pluginLn, c.ownerLn, c.metricsLn} {
				if ln != nil {
					_ = ln.Close()
				}
			}
		}
	}()
	if c.store == nil {
		st, err := store.OpenWith(ctx, o.DSN, store.OpenOptions{PreMigrationBackupDir: o.PreMigrationBackupDir, Core: coreVersion()})
		if errors.Is(err, store.ErrPreMigrationBackupDir) {
			return nil, fmt.Errorf("opening the store: %w: give one with --%s", err, FlagPreMigrationBackupDir)
		}
		if err != nil {
			return nil, fmt.Errorf("opening the store: %w", err)
		}
		c.store, c.closeDB = st, st.Close
	}
	var metrics *Metrics
	if o.MetricsAddr != "" {
		metrics = NewMetrics(o.Log)
	}
	tokens := NewTokens(cs.CoreV1(), o.Namespace, o.ServiceAccount, nil)
	caller := &Caller{Tokens: tokens, Resolve: o.Resolve, Metrics: metrics}
	vs, ok := c.store.(ViewStore)
	if !ok {
		return nil, errors.New("the store cannot read pages for views")
	}
	if ls, ok := c.store.(replicatedStore); ok && ls.Postgres() {
		if err := CheckLeases(o.LeaseTTL, o.LeaseRenew); err != nil {
			return nil, err
		}
		c.leases = NewLeases(LeaseOptions{Store: ls, Owner: o.Replica, Address: o.ReplicaAddress, TTL: o.LeaseTTL, Renew: o.LeaseRenew, Apply: c.applyOwned, Log: o.Log,
			Check: func(ctx context.Context) error {
				// /version is readable by every identity (system:public-info-viewer).
				return cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
			}})
		o.Scheduler.WorkerContext, o.Views.WorkerContext = c.leases.WorkerContext, c.leases.WorkerContext
	}
	vo := o.Views
	vo.Exporter = &Exporter{Store: vs, Caller: caller, CallTimeout: o.Scheduler.CallTimeout}
	vo.Store, vo.Log, vo.Metrics = c.store, o.Log, metrics
	c.views = NewViews(ctx, vo)
	so := o.Scheduler
	so.Store, so.Connector, so.Log, so.Metrics = c.store, caller, o.Log, metrics
	so.OnStop = tokens.Forget
	so.OnStored = c.views.Poke
	c.sched = NewScheduler(ctx, so)
	c.leasesDone = make(chan struct{})
	if c.leases != nil {
		go func() {
			defer close(c.leasesDone)
			c.leases.Run(ctx)
		}()
		o.Log.Info("sharing the plugins with the other replicas by leases in PostgreSQL", "replica", c.leases.Owner())
	} else {
		close(c.leasesDone)
	}
	c.plugins, err = WatchPlugins(ctx, cfg, o.Namespace, c.onPlugins, c.markRemoved)
	if err != nil {
		return nil, err
	}
	verifier, err := auth.NewVerifier(cs.AuthenticationV1(), auth.Options{Serving: c.plugins.Running, CacheTTL: o.TokenCacheTTL})
	if err != nil {
		return nil, err
	}
	owner, err := auth.NewOwnerVerifier(cs.AuthenticationV1(), o.Namespace, auth.Options{})
	if err != nil {
		return nil, err
	}
	if c.pluginLn, err = net.Listen("tcp", o.PluginAddr); err != nil {
		return nil, fmt.Errorf("plugin listener: %w", err)
	}
	if c.ownerLn, err = net.Listen("tcp", o.OwnerAddr); err != nil {
		return nil, fmt.Errorf("owner listener: %w", err)
	}
	handlers := map[net.Listener]http.Handler{c.pluginLn: c.pluginHandler(verifier, o.Log), c.ownerLn: c.ownerHandler(owner, o.Log)}
	if metrics != nil {
		if err := metrics.watchStore(c.store, c.views); err != nil {
			return nil, err
		}
		if c.metricsLn, err = net.Listen("tcp", o.MetricsAddr); err != nil {
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
		handlers[c.metricsLn] = metricsHandler(metrics)
	}
	for ln, h := range handlers {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		c.servers = append(c.servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				o.Log.Error("core listener stopped", "addr", ln.Addr().String(), "error", err.Error())
			}
		}()
	}
	go func() {
		defer close(c.done)
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer scancel()
		for _, srv := range c.servers {
			_ = srv.Shutdown(sctx)
		}
		<-c.leasesDone
		c.sched.Wait()
		c.views.Wait()
		if err := c.closeDB(); err != nil {
			o.Log.Error("closing the store", "error", err.Error())
		}
	}()
	o.Log.Info("openfief-core serving", "plugins", c.pluginLn.Addr().String(), "owner", c.ownerLn.Addr().String())
	return c, nil
}

// Run starts the core and serves until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	c, err := Start(ctx, cfg, o)
	if err != nil {
		return err
	}
	<-ctx.Done()
	c.Stop()
	return nil
}

// Stop stops calling plugins, closes both listeners (calls in flight get
// shutdownGrace) and closes the store.
func (c *Core) Stop() {
	c.cancel()
	<-c.done
}

// PluginAddr is the plugin listener's address.
func (c *Core) PluginAddr() string { return c.pluginLn.Addr().String() }

// OwnerAddr is the owner listener's address.
func (c *Core) OwnerAddr() string { return c.ownerLn.Addr().String() }

// MetricsAddr is the metrics listener's address, "" when it serves none.
func (c *Core) MetricsAddr() string {
	if c.metricsLn == nil {
		return ""
	}
	return c.metricsLn.Addr().String()
}

// Scheduler is the core's scheduler.
func (c *Core) Scheduler() *Scheduler { return c.sched }

// Views runs the core's exports to views.
func (c *Core) Views() *Views { return c.views }
