package images

import (
	"context"
	"strings"
	"testing"
)

// TestAttestRefuses: no builder or command, no attestation.
func TestAttestRefuses(t *testing.T) {
	for _, p := range []Provenance{{Command: "make release"}, {BuilderID: LocalBuilderID}} {
		if _, err := Attest(context.Background(), &Result{}, []Pushed{{Name: "x", Ref: "r.example/x@sha256:" + strings.Repeat("a", 64)}}, nil, p, nil); err == nil {
			t.Errorf("%+v: attested", p)
		}
	}
}
