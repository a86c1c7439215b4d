package cosign

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestVerifyFile: a bundle kept beside a file verifies for exactly that
// file, that predicate type and a trusted key or the trusted root.
func TestVerifyFile(t *testing.T) {
	file := []byte(`{"plugins":[]}` + "\n")
	sum := sha256.Sum256(file)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	stmt, err := ocisign.StatementWith(digest, plugins.CatalogPredicateType, []byte(`{"version":"v1.2.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	key := cosigntest.NewKey(t)
	other := cosigntest.NewKey(t)
	keyless := cosigntest.NewKeyless(t, testIssuer, testSubject)
	keyed := key.Bundle(t, stmt)
	trustKey := []Option{WithPublicKeys([]string{key.PublicKeyPEM(t)})}

	id, pred, err := VerifyFile(keyed, file, plugins.CatalogPredicateType, trustKey...)
	if err != nil || id.PublicKeyPEM != key.PublicKeyPEM(t) || string(pred) != `{"version":"v1.2.0"}` {
		t.Fatalf("VerifyFile(key bundle) = %+v, %s, %v; want the key and the predicate", id, pred, err)
	}
	id, _, err = VerifyFile(keyless.Bundle(t, stmt), file, plugins.CatalogPredicateType, WithTrustedMaterial(keyless.VS), WithSCTRequired(false))
	if err != nil || id.Issuer != testIssuer || id.Subject != testSubject {
		t.Fatalf("VerifyFile(keyless bundle) = %+v, %v; want %s", id, err, testSubject)
	}

	tampered := append([]byte(nil), file...)
	tampered[2] = 'P'
	sigStmt := cosigntest.Statement(t, digest, plugins.SignPredicateType)
	for name, c := range map[string]struct {
		bundle, file []byte
		opts         []Option
		want         error
	}{
		"tampered file":       {bundle: keyed, file: tampered, opts: trustKey, want: ErrUnverifiedBundle},
		"untrusted key":       {bundle: other.Bundle(t, stmt), file: file, opts: trustKey, want: ErrUnverifiedBundle},
		"no key trusted":      {bundle: keyed, file: file, want: ErrUnverifiedBundle},
		"another predicate":   {bundle: key.Bundle(t, sigStmt), file: file, opts: trustKey, want: ErrPredicateType},
		"not a bundle":        {bundle: []byte("not json"), file: file, opts: trustKey, want: ErrMalformedBundle},
		"keyless, other root": {bundle: keyless.Bundle(t, stmt), file: file, opts: trustKey, want: ErrUnverifiedBundle},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := VerifyFile(c.bundle, c.file, plugins.CatalogPredicateType, c.opts...); !errors.Is(err, c.want) {
				t.Errorf("VerifyFile = %v, want %v", err, c.want)
			}
		})
	}
}
