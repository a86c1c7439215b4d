package plugins

import (
	"cmp"
	"maps"
	"slices"
)

// sortedKeys returns the keys of a set in ascending order, so every list the
// package produces is deterministic: slices.Sorted(maps.Keys(m)), kept by
// name for approval.go, purge.go and validate.go.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
