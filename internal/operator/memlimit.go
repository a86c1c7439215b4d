package operator

import (
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// MemoryLimitRatio is the share of its container's memory limit the
// operator gives the Go runtime as its soft limit (SetMemoryLimit).
const MemoryLimitRatio = 0.9

// SetMemoryLimit sets the Go runtime's soft memory limit to
// MemoryLimitRatio of the memory limit of the process's cgroup, its
// container's limit (issue 18): the collector then works harder as the
// heap nears the limit instead of letting garbage grow to twice the live
// heap, which at 10,000 Plugins would pass deploy/operator's 512 MiB. A
// GOMEMLIMIT in the environment is kept, AUTOMEMLIMIT=off turns this off
// and a process without a limit is left as it is. It returns the limit
// set, 0 when none was.
func SetMemoryLimit(logger *slog.Logger) (int64, error) {
	return memlimit.SetGoMemLimitWithOpts(
		memlimit.WithRatio(MemoryLimitRatio),
		memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(logger),
	)
}
