package core

import "errors"

// ErrOutsideTiers is wrapped when a delivery holds data outside the plugin's
// data tiers (OF-11); nothing of its batch is stored, and the call is not
// retried: the connector would answer the same.
var ErrOutsideTiers = errors.New("delivery outside the granted data tiers")

// ErrBatchMismatch is wrapped when a delivery's batch_id is not the one the
// core sent (the contract requires the echo); nothing is stored.
var ErrBatchMismatch = errors.New("delivery batch_id differs from the request's")

// ErrNotConnector is returned for a call to an instance the core does not
// serve as a connector now: unknown, not running, or without the connector
// capability.
var ErrNotConnector = errors.New("not a running connector")
