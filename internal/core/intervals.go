package core

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// ErrInterval is wrapped by ParseInterval's errors.
var ErrInterval = errors.New("bad sync interval")

// ParseInterval reads one per-instance sync interval, NAME=DURATION (for
// example fx=15m), as the --sync-interval-for flag takes it: a valid plugin
// name and a Go duration of at least MinSyncInterval and at most a week.
func ParseInterval(s string) (string, time.Duration, error) {
	name, dur, ok := strings.Cut(s, "=")
	if !ok {
		return "", 0, fmt.Errorf("%w: %q is not NAME=DURATION", ErrInterval, s)
	}
	if err := plugins.ValidateName(name); err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrInterval, err)
	}
	d, err := time.ParseDuration(dur)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %q: %w", ErrInterval, dur, err)
	}
	if err := CheckInterval(d); err != nil {
		return "", 0, err
	}
	return name, d, nil
}

// maxSyncInterval is the longest interval the core accepts.
const maxSyncInterval = 7 * 24 * time.Hour

// CheckInterval refuses an interval shorter than MinSyncInterval or longer
// than a week.
func CheckInterval(d time.Duration) error {
	if d < MinSyncInterval || d > maxSyncInterval {
		return fmt.Errorf("%w: %v is not between %v and %v", ErrInterval, d, MinSyncInterval, maxSyncInterval)
	}
	return nil
}
