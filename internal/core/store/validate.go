package store

import (
	"github.com/arkadiuss/openfief/internal/core/store/deliveryrules"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// The delivery rules live in internal/core/store/deliveryrules, which links
// no database, so the conformance harness applies them too; these names are
// the store's view of them.

// Bounds on one delivery (deliveryrules).
const (
	MaxBatchRows = deliveryrules.MaxBatchRows
	MaxPostings  = deliveryrules.MaxPostings
	MaxText      = deliveryrules.MaxText
	MaxWatermark = deliveryrules.MaxWatermark
	MaxInstance  = deliveryrules.MaxInstance
)

// The store's own rules, beside the SDK's (deliveryrules).
var (
	ErrTooLarge     = deliveryrules.ErrTooLarge
	ErrTooLong      = deliveryrules.ErrTooLong
	ErrNotText      = deliveryrules.ErrNotText
	ErrUnbalanced   = deliveryrules.ErrUnbalanced
	ErrInstanceName = deliveryrules.ErrInstanceName
	ErrKind         = deliveryrules.ErrKind
)

// ValidationError says why a delivery, or another argument, was refused;
// nothing of it was stored (deliveryrules.ValidationError).
type ValidationError = deliveryrules.ValidationError

func refuse(field string, err error) *ValidationError { return deliveryrules.Refuse(field, err) }

func validInstance(name string) bool { return deliveryrules.ValidInstance(name) }

// Validate returns the *ValidationError Import would refuse d with, or nil,
// without touching the database: a preview (INGEST_MODE_PREVIEW) shows the
// owner the same refusals an import would.
func Validate(instance string, kind Kind, d *connectorv1.Delivery) error {
	return deliveryrules.Validate(instance, kind, d)
}

func validate(instance string, kind Kind, d *connectorv1.Delivery) error {
	return deliveryrules.Validate(instance, kind, d)
}
