package main

import (
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// checkOwnerEgress checks the one owner egress slot: the owner grants the
// host of their own WebDAV server, which no manifest can name.
//
// It is alone in this file because Manifest.OwnerEgress arrives with the
// owner-egress change; until that is merged this file does not compile.
func checkOwnerEgress(t *testing.T, m plugins.Manifest) {
	t.Helper()
	if m.OwnerEgress != 1 {
		t.Errorf("ownerEgress = %d, want 1", m.OwnerEgress)
	}
}
