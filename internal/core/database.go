package core

import (
	"context"
	"errors"
	"time"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/display"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Store is what the core needs of its database; *store.Store is it.
type Store interface {
	Import(ctx context.Context, instance string, kind store.Kind, d *connectorv1.Delivery) (store.ImportResult, error)
	Watermark(ctx context.Context, instance string) (string, error)
	RecordSync(ctx context.Context, instance string, r store.SyncRecord) error
	Status(ctx context.Context, instance string) (store.InstanceRecord, error)
	Instances(ctx context.Context) ([]string, error)
	// The removed instances' part (removed.go, OF-38).
	Claim(ctx context.Context, name, uid string, at time.Time) (string, error)
	MarkRemoved(ctx context.Context, name, uid string, at time.Time) (string, error)
	LiveInstances(ctx context.Context) ([]store.LiveInstance, error)
	RemovedInstances(ctx context.Context) ([]store.RemovedInstance, error)
	Purge(ctx context.Context, key string, preview bool) (store.PurgeCounts, error)
}

// isInvalidDelivery tells a delivery the store refused by its rules (not
// retried: the connector would deliver the same) from a database failure.
func isInvalidDelivery(err error) bool {
	var ve *store.ValidationError
	return errors.As(err, &ve)
}

// ownerStatus turns what the store holds of instance name into the owner
// API's status, escaping the plugin-written text; an instance the store
// does not know yet has an empty record, so an empty status. The caller
// adds the schedule.
func ownerStatus(name string, rec store.InstanceRecord) ownerapi.InstanceStatus {
	// The last error and the watermark are plugin-written text; a record
	// stored before OF-17 may hold them raw, so they are escaped here too.
	out := ownerapi.InstanceStatus{Plugin: name, Instance: name, LastOK: rec.LastOK, LastError: display.Message(rec.LastError), Watermark: display.Text(rec.Watermark)}
	if plugin, _, ok := store.SplitKey(name); ok {
		out.Plugin = plugin
	}
	out.UID = rec.UID
	if !rec.RemovedAt.IsZero() {
		t := rec.RemovedAt.UTC()
		out.Removed, out.RemovedAt = true, &t
	}
	if !rec.LastSync.IsZero() {
		t := rec.LastSync.UTC()
		out.LastSync = &t
	}
	if !rec.NextSync.IsZero() {
		t := rec.NextSync.UTC()
		out.NextSync = &t
	}
	r := rec.Rows
	out.Rows = ownerapi.RowCounts{
		Batches: r.Batches, Transactions: r.Transactions, Postings: r.Postings, Balances: r.Balances,
		Prices: r.Prices, FxRates: r.FxRates, IndexReadings: r.IndexReadings, Problems: r.Problems,
	}
	out.RowsTotal = r.Transactions + r.Postings + r.Balances + r.Prices + r.FxRates + r.IndexReadings + r.Problems
	return out
}
