// Package testutil holds helpers shared by the tests of several packages:
// made-up image references, a polling Eventually, and fluent builders of
// Plugins and PluginGrants (MakePlugin, MakeGrant, GrantFor) in the style of
// kueue's wrappers. It is imported only from _test.go files. It imports
// internal/plugins, so the domain's own tests cannot use it.
package testutil

import (
	"crypto/sha256"
	"encoding/hex"
)

// Digest makes a distinct, valid sha256 digest from a word.
func Digest(word string) string {
	sum := sha256.Sum256([]byte(word))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Image is a digest-pinned image reference in a made-up registry, named
// after word.
func Image(word string) string {
	return "registry.example.com/plugins/" + word + "@" + Digest(word)
}

// GateImage is the isolation gate image (OF-42) the tests' operators are
// given where no container runs (kwok's pods, the API server alone): a
// digest-pinned name that is never pulled.
var GateImage = "registry.example.com/openfief/check-probe@" + Digest("check-probe")
