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

// union returns the sorted, de-duplicated values of a and b.
func union[T ~string](a, b []T) []T {
	set := make(map[T]struct{}, len(a)+len(b))
	for _, v := range a {
		set[v] = struct{}{}
	}
	for _, v := range b {
		set[v] = struct{}{}
	}
	return slices.Sorted(maps.Keys(set))
}

// intersect returns the sorted, de-duplicated values present in both a and b.
func intersect[T ~string](a, b []T) []T {
	in := make(map[T]struct{}, len(b))
	for _, v := range b {
		in[v] = struct{}{}
	}
	both := map[T]struct{}{}
	for _, v := range a {
		if _, ok := in[v]; ok {
			both[v] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(both))
}

// filter keeps the values ok accepts, so an entry validation would refuse
// is never granted.
func filter[T any](s []T, ok func(T) bool) []T {
	return nilIfEmpty(slices.DeleteFunc(s, func(v T) bool { return !ok(v) }))
}

// subtract returns the sorted, de-duplicated values of a missing from b.
func subtract[T ~string](a, b []T) []T {
	in := make(map[T]struct{}, len(b))
	for _, v := range b {
		in[v] = struct{}{}
	}
	rest := map[T]struct{}{}
	for _, v := range a {
		if _, ok := in[v]; !ok {
			rest[v] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(rest))
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
