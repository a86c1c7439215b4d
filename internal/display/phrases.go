package display

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Phrases the CLI and the dashboard both show, kept here so the two say the
// same thing in the same words.

// Unknown is what Age shows for a time that was never set.
const Unknown = "<unknown>"

// Age is how long before now t was, in kubectl's short form ("45s", "3h",
// "12d"); Unknown for the zero time. The CLI and the dashboard show every
// age through it, so a plugin reads as old in both.
func Age(now, t time.Time) string {
	if t.IsZero() {
		return Unknown
	}
	return duration.HumanDuration(now.Sub(t))
}

// OwnerSlots says how many egress hosts of the owner's choosing a manifest
// allows (OF-36), which the vendor leaves unnamed, and how the owner names
// one.
func OwnerSlots(n int) string {
	return fmt.Sprintf("up to %d of your choosing; the vendor names none (name one with openfief plugin approve NAME --host HOST)", n)
}
