// Package proxyserver assembles the egress proxy (D-32, D-63) the one way it
// runs, in the cluster and on a developer's machine: the TokenReview adapter
// behind the caching reviewer, the allow-list ConfigMap watch, a Prometheus
// registry with the proxy's metrics and the Go and process collectors, the
// pending-connection limits, the ops endpoints and the shutdown grace.
// cmd/egress-proxy parses its flags into Options and calls Run;
// internal/devstack calls Start, so `openfief dev` runs the proxy as it is
// deployed. The proxy itself is package egress, the Kubernetes adapters
// package kube; this package only wires them.
package proxyserver

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/egress/kube"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Server is a running egress proxy: Start returns it once its listeners are
// bound, serving in the background.
type Server struct {
	srv   *egress.Server
	lists *kube.AllowLists
	stop  context.CancelFunc
	done  chan struct{} // closed when serving has ended and the watch stopped
	err   error         // what egress.Server.Serve returned
}

// Start validates o, builds the proxy and its adapters, binds its listeners
// and serves until ctx is done or Stop is called. The allow-list watch
// outlives ctx until the shutdown is over, so a host taken off a list during
// the shutdown grace still closes its tunnels.
func Start(ctx context.Context, o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Client == nil {
		return nil, errors.New("egress proxy: a Kubernetes client (Options.Client) is required")
	}
	o = o.withDefaults()

	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	metrics, err := egress.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	inner, err := kube.NewTokenReviewer(o.Client.AuthenticationV1(), plugins.AudienceEgress)
	if err != nil {
		return nil, err
	}
	reviewer := egress.NewCachingTokenReviewer(inner, egress.WithCacheTTL(o.ReviewCacheTTL), egress.WithReviewMetrics(metrics))

	watchCtx, stopWatch := context.WithCancel(context.Background())
	lists := kube.WatchAllowLists(watchCtx, o.Client, o.Namespace, o.AllowListConfigMap, o.Log)
	srv, err := egress.NewServer(egress.Config{
		Proxy: egress.Options{
			Reviewer:            reviewer,
			AllowLists:          lists,
			Resolver:            o.Resolver,
			Dialer:              o.Dialer,
			Logger:              o.Log,
			Metrics:             metrics,
			DialTimeout:         o.DialTimeout,
			IdleTimeout:         o.IdleTimeout,
			MaxTunnelsPerPlugin: o.MaxTunnelsPerPlugin,
			MaxTunnels:          o.MaxTunnels,
			ClusterDomain:       o.ClusterDomain,
			UnsafeAllowPrefixes: o.UnsafeAllowPrefixes,
		},
		MaxPendingConns:     o.MaxPendingConns,
		MaxPendingPerClient: o.MaxPendingPerClient,
		Addr:                o.Listen,
		OpsAddr:             o.MetricsListen,
		Ready:               lists.Ready,
		Registry:            reg,
		ShutdownGrace:       o.ShutdownGrace,
	})
	if err != nil {
		stopWatch()
		return nil, err
	}
	o.Log.Info("following the allow-list ConfigMap", "configmap", o.Namespace+"/"+o.AllowListConfigMap)

	serveCtx, cancel := context.WithCancel(ctx)
	s := &Server{srv: srv, lists: lists, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = srv.Serve(serveCtx)
		stopWatch()
	}()
	return s, nil
}

// Run starts the proxy o describes and serves until ctx is done, then shuts
// down. It returns nil after a shutdown ctx asked for, or the error that
// kept it from starting or ended serving. It is cmd/egress-proxy's whole
// serving path.
func Run(ctx context.Context, o Options) error {
	s, err := Start(ctx, o)
	if err != nil {
		return err
	}
	return s.Wait()
}

// Addr is the host:port the proxy serves CONNECT on.
func (s *Server) Addr() string { return s.srv.Addr().String() }

// MetricsAddr is the host:port of /healthz, /readyz and /metrics, empty
// when Options.MetricsListen was.
func (s *Server) MetricsAddr() string {
	if a := s.srv.OpsAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Ready reports whether the allow-lists are loaded, and why not; /readyz
// answers the same.
func (s *Server) Ready() (bool, string) { return s.lists.Ready() }

// Wait waits until serving has ended (its context done, Stop, or a server
// failing) and the shutdown is over, and returns what ended it: nil for a
// shutdown that was asked for.
func (s *Server) Wait() error {
	<-s.done
	return s.err
}

// Stop shuts the proxy down as the end of its context would, and waits for
// the shutdown to be over (at most the shutdown grace once tunnels are open).
func (s *Server) Stop() error {
	s.stop()
	return s.Wait()
}
