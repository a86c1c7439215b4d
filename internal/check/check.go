// Package check decides and reports `openfief check` (OF-28):
// whether a cluster has what the platform needs and, once installed,
// whether the platform runs as installed. Each check is a Result decided by
// a pure function over what was read (decide.go); gather.go reads the
// cluster, each call bounded in time; render.go prints the results as
// grouped lines or as one JSON document.
package check

import (
	"cmp"
	"slices"
)

// Status is a check's outcome.
type Status string

const (
	// OK means the check passed.
	OK Status = "ok"
	// Warn is not a failure, but something the owner should know (such as a
	// check that is not made yet).
	Warn Status = "warn"
	// Fail means the check failed; `openfief check` exits non-zero.
	Fail Status = "fail"
)

// The groups results are shown under, in this order.
const (
	// GroupKubernetes holds the cluster's version, APIs and the CRDs.
	GroupKubernetes = "kubernetes"
	// GroupInstall holds what only an install needs (--pre): the namespace
	// and the admin's permissions.
	GroupInstall = "pre-install"
	// GroupPlatform holds the installed platform: its Deployments, images
	// and admission policy.
	GroupPlatform = "platform"
	// GroupRuntime holds what the running platform publishes and serves:
	// signing keys, allow-list, the core.
	GroupRuntime = "runtime"
)

// groupRank orders the groups as they are printed.
var groupRank = map[string]int{GroupKubernetes: 0, GroupInstall: 1, GroupPlatform: 2, GroupRuntime: 3, GroupIsolation: 4}

// groupTitle is each group's heading in the text output.
var groupTitle = map[string]string{
	GroupKubernetes: "Kubernetes",
	GroupInstall:    "Before install",
	GroupPlatform:   "Platform",
	GroupRuntime:    "Runtime",
	GroupIsolation:  "Isolation",
}

// Result is one check: a stable name in its group, its outcome, and when
// not OK why and how to fix it. Reason may hold a detail when OK too (a
// version). Every field is shown through internal/display when printed.
type Result struct {
	Group  string `json:"group"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	Reason string `json:"reason"`
	Hint   string `json:"hint"`
}

// Sort orders results as they are shown: by group, then by name.
func Sort(rs []Result) {
	slices.SortStableFunc(rs, func(a, b Result) int {
		return cmp.Or(cmp.Compare(groupRank[a.Group], groupRank[b.Group]), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Name, b.Name))
	})
}

// Passed reports whether no result failed (warnings pass).
func Passed(rs []Result) bool {
	return !slices.ContainsFunc(rs, func(r Result) bool { return r.Status != OK && r.Status != Warn })
}

func ok(group, name, reason string) Result {
	return Result{Group: group, Name: name, Status: OK, Reason: reason}
}

func fail(group, name, reason, hint string) Result {
	return Result{Group: group, Name: name, Status: Fail, Reason: reason, Hint: hint}
}

func warn(group, name, reason, hint string) Result {
	return Result{Group: group, Name: name, Status: Warn, Reason: reason, Hint: hint}
}
