// Package memlimit gives a platform binary's Go runtime a soft memory limit
// under its container's.
package memlimit

import (
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Ratio is the share of its container's memory limit a binary gives the Go
// runtime as its soft limit.
const Ratio = 0.9

// Set sets the Go runtime's soft memory limit to Ratio of the memory limit
// of the process's cgroup (v1 or v2), its container's limit: the collector
// then works harder as the heap nears the limit instead of letting garbage
// grow to twice the live heap and the kernel kill the container. A
// GOMEMLIMIT in the environment is kept, AUTOMEMLIMIT=off turns this off and
// a process without a limit is left as it is. It returns the limit set, 0
// when none was; what it did is logged to logger.
func Set(logger *slog.Logger) (int64, error) {
	return memlimit.SetGoMemLimitWithOpts(
		memlimit.WithRatio(Ratio),
		memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(logger),
	)
}
