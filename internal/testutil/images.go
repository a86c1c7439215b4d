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
