package catalog

import (
	"strings"
	"testing"
)

// TestCheckProbe: a development build pins no probe and no version; a
// release's pinned probe must be an image pinned by digest.
func TestCheckProbe(t *testing.T) {
	if _, ok, err := CheckProbe(); ok || err != nil || Version() != "" {
		t.Fatalf("a development build: CheckProbe ok %t, %v, Version %q; want none", ok, err, Version())
	}
	t.Cleanup(func() { releasedProbe = "" })
	releasedProbe = "ghcr.io/arkadiuss/openfief/check-probe@sha256:" + strings.Repeat("ab", 32)
	if ref, ok, err := CheckProbe(); !ok || err != nil || ref.String() != releasedProbe {
		t.Errorf("CheckProbe = %v, %t, %v; want %s", ref, ok, err, releasedProbe)
	}
	releasedProbe = "ghcr.io/arkadiuss/openfief/check-probe:latest"
	if _, ok, err := CheckProbe(); ok || err == nil {
		t.Errorf("CheckProbe of a tag = ok %t, %v; want an error", ok, err)
	}
}
