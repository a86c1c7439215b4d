//go:build heavy

package core

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/pgtest"
)

// BenchmarkCoreScalePostgres is BenchmarkCoreScale on PostgreSQL (started
// for the benchmark), where the core always keeps leases: one replica
// holding every instance, its workers started by its leases as Start wires
// them, the lease statements in the store's load.
//
//	go test -tags heavy ./internal/core -run '^$' -bench CoreScalePostgres -benchtime 1x -timeout 30m
func BenchmarkCoreScalePostgres(b *testing.B) {
	srv, err := pgtest.Start(context.Background())
	if err != nil {
		b.Fatalf("PostgreSQL cannot start here (make test-deps installs it): %v", err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	dsn, err := srv.NewDatabase(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	for b.Loop() {
		runCoreScale(b, st, func(st *store.Store, apply func([]Target)) *Leases {
			return NewLeases(LeaseOptions{Store: st, Owner: "bench", Apply: apply,
				Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		})
	}
}
