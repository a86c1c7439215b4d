package plugins

import (
	"cmp"
	"slices"
)

// sortedKeys returns the keys of a set in ascending order, so every list the
// package produces is deterministic.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
