// Package sample is soak's own test input: one test that passes, one that
// fails when SOAK_SAMPLE_FAIL is set, one that skips, and a subtest.
package sample

import (
	"os"
	"testing"
)

func TestAlwaysPasses(t *testing.T) {
	t.Run("sub", func(t *testing.T) {})
}

func TestFailsOnRequest(t *testing.T) {
	if os.Getenv("SOAK_SAMPLE_FAIL") != "" {
		t.Log("failing as asked")
		t.Fatal("asked to fail")
	}
}

func TestSkips(t *testing.T) { t.Skip("always skips") }
