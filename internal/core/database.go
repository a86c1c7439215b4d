package core

import (
	"context"
	"errors"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
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
