package egress

import (
	"sync"
	"sync/atomic"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// AllowListSource gives the proxy the allow-lists the operator publishes
// (D-32). kube.AllowLists implements it on the openfief-egress-allowlist
// ConfigMap; tests use an AllowListStore.
type AllowListSource interface {
	// AllowLists returns the current snapshot. Every list in it was swapped
	// in at once; nil or a missing key means the plugin may reach nothing.
	// Callers must not modify it.
	AllowLists() plugins.AllowLists
	// Subscribe calls fn with each new snapshot, after it has become the
	// current one, until the returned function is called. Calls are
	// serialised; fn must not call Subscribe or the function it returned.
	Subscribe(fn func(plugins.AllowLists)) (unsubscribe func())
}

// AllowListStore is an AllowListSource whose lists are set by its owner: it
// swaps whole snapshots atomically and tells subscribers after each swap. The
// zero value holds no lists and is ready to use.
type AllowListStore struct {
	current atomic.Pointer[plugins.AllowLists]

	mu   sync.Mutex // serialises Set and Subscribe
	next int
	subs map[int]func(plugins.AllowLists)
}

// AllowLists returns the current snapshot, nil before the first Set.
func (s *AllowListStore) AllowLists() plugins.AllowLists {
	if p := s.current.Load(); p != nil {
		return *p
	}
	return nil
}

// Set makes lists the current snapshot and then calls every subscriber with
// it. The store keeps lists; the caller must not modify it afterwards. Set
// nil to take every list away (fail closed).
func (s *AllowListStore) Set(lists plugins.AllowLists) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current.Store(&lists)
	for _, fn := range s.subs {
		fn(lists)
	}
}

// Subscribe implements AllowListSource.
func (s *AllowListStore) Subscribe(fn func(plugins.AllowLists)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[int]func(plugins.AllowLists){}
	}
	id := s.next
	s.next++
	s.subs[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, id)
	}
}
