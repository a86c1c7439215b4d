package core

import (
	"fmt"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// checkGrant refuses a delivery the instance's grant does not allow as it
// stands now. The caller holds w.grant from this check until the delivery
// is stored, and Update takes w.grant to change the target or stop the
// worker: a grant narrowed, or revoked, while a call was open applies to
// what that call delivers, not to the grant the call began
// under.
func (w *worker) checkGrant(instance string, d *connectorv1.Delivery) error {
	if w.stopped {
		return fmt.Errorf("plugin %q stopped running during the call, nothing of its delivery is stored: %w", instance, ErrNotConnector)
	}
	return CheckTiers(d, w.getTarget().DataTiers)
}
