package cosign

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// publicGoodRootSHA256 is the hash of trusted_root.json that the signed TUF
// targets.json (version 14) of the public-good instance records; see
// trusted_root.json.SOURCE.
const publicGoodRootSHA256 = "6494e21ea73fa7ee769f85f57d5a3e6a08725eae1e38c755fc3517c9e6bc0b66"

func TestTrustedRoot(t *testing.T) {
	sum := sha256.Sum256(publicGoodRoot)
	if got := hex.EncodeToString(sum[:]); got != publicGoodRootSHA256 {
		t.Fatalf("embedded trusted_root.json sha256 = %s, want %s (update trusted_root.json.SOURCE with the file)", got, publicGoodRootSHA256)
	}
	tr, err := PublicGoodTrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	// What the current public-good root holds: Rekor v1 and the first Rekor
	// v2 log, two CT logs, two Fulcio CAs and the Sigstore TSA.
	if n := len(tr.RekorLogs()); n != 2 {
		t.Errorf("%d Rekor logs, want 2", n)
	}
	if n := len(tr.CTLogs()); n != 2 {
		t.Errorf("%d CT logs, want 2", n)
	}
	if n := len(tr.FulcioCertificateAuthorities()); n != 2 {
		t.Errorf("%d Fulcio CAs, want 2", n)
	}
	if n := len(tr.TimestampingAuthorities()); n != 1 {
		t.Errorf("%d timestamp authorities, want 1", n)
	}
	for id, l := range tr.RekorLogs() {
		if l.BaseURL != "https://rekor.sigstore.dev" && l.BaseURL != "https://log2025-1.rekor.sigstore.dev" {
			t.Errorf("unexpected Rekor log %s at %s", id, l.BaseURL)
		}
	}
	// The default verifier is built on it.
	if _, err := NewVerifier(); err != nil {
		t.Errorf("NewVerifier with the embedded root: %v", err)
	}
}
