package devstack

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// A registry outage on demand, for tests of what the platform does while
// the registry that serves plugin images is down (fail static for what
// runs, fail closed for what is new, OF-2): the in-cluster mode's bridge
// registry can be stopped, its ports then refusing connections, and served
// again at the same addresses with the images it held.

// switchableServer serves one handler on fixed addresses, and can stop and
// serve again. The handler keeps its state (an in-memory registry's images)
// across a stop.
type switchableServer struct {
	handler http.Handler
	addrs   []string

	mu  sync.Mutex
	srv *http.Server // nil while stopped
}

// serveSwitchable serves h on lns, whose addresses it keeps for a restart.
func serveSwitchable(h http.Handler, lns ...net.Listener) *switchableServer {
	s := &switchableServer{handler: h}
	for _, ln := range lns {
		s.addrs = append(s.addrs, ln.Addr().String())
	}
	s.serve(lns)
	return s
}

func (s *switchableServer) serve(lns []net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	for _, ln := range lns {
		go func() { _ = srv.Serve(ln) }()
	}
	s.srv = srv
}

// stop closes the listeners and every connection, open or idle: a client
// in the middle of a request sees it cut, a new one is refused. Stopping a
// stopped server does nothing.
func (s *switchableServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// start listens again on the same addresses and serves. Starting a running
// server does nothing.
func (s *switchableServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	var lns []net.Listener
	for _, a := range s.addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return fmt.Errorf("serve again at %s: %w", a, err)
		}
		lns = append(lns, ln)
	}
	s.serve(lns)
	return nil
}

// errNoBridgeRegistry is StopRegistry's and StartRegistry's answer outside
// the in-cluster mode.
var errNoBridgeRegistry = errors.New("devstack: no bridge registry to stop or start: only the in-cluster mode serves one")

// StopRegistry stops the in-cluster mode's registry of plugin images (the
// demo images and the check probe, RegistryHost and RegistryLoopback), as a
// registry that went down: both its ports refuse connections until
// StartRegistry. Images already on the node keep running.
func (s *Stack) StopRegistry() error {
	if s.bridgeRegistry == nil {
		return errNoBridgeRegistry
	}
	s.bridgeRegistry.stop()
	return nil
}

// StartRegistry serves the registry StopRegistry stopped again, at the same
// addresses and with every image it held.
func (s *Stack) StartRegistry() error {
	if s.bridgeRegistry == nil {
		return errNoBridgeRegistry
	}
	return s.bridgeRegistry.start()
}
