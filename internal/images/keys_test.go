package images

import (
	"bytes"
	"crypto/elliptic"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// TestKeyFiles: an encrypted cosign key needs its password, and no error
// repeats the key or the password.
func TestKeyFiles(t *testing.T) {
	const password = "correct horse battery staple"
	dir := t.TempDir()
	keySigner(t, dir, "enc", []byte(password))
	raw, err := os.ReadFile(filepath.Join(dir, "enc.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Fatal("not a cosign-encrypted key")
	}
	const wrong = "not-the-password-42"
	for _, pw := range []func() ([]byte, error){nil, func() ([]byte, error) { return []byte(wrong), nil }} {
		_, err := ocisign.NewKeySignerFromPEM(raw, pw)
		if err == nil {
			t.Fatal("an encrypted key opened without its password")
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), password) {
			t.Errorf("error repeats secret material: %v", err)
		}
	}
	if _, err := ocisign.NewKeySignerFromPEM([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), nil); err == nil {
		t.Error("a public key was accepted as a signing key")
	}
}

// keySigner writes a cosign-compatible key pair (encrypted with password
// when given) and a signers.json trusting it as name into dir, as
// `images keygen` does, and loads a signer from the key file.
func keySigner(t *testing.T, dir, name string, password []byte) *ocisign.KeySigner {
	t.Helper()
	var pf cryptoutils.PassFunc
	if password != nil {
		pf = func(bool) ([]byte, error) { return password, nil }
	}
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	if err != nil {
		t.Fatal(err)
	}
	signers, _ := json.Marshal(map[string]any{"signers": []any{map[string]string{"name": name, "publicKey": string(pub)}}})
	for file, data := range map[string][]byte{name + ".key": priv, name + ".signers.json": signers} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var pw func() ([]byte, error)
	if password != nil {
		pw = func() ([]byte, error) { return password, nil }
	}
	s, err := ocisign.NewKeySignerFromPEM(priv, pw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
