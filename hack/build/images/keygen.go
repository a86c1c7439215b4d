package main

import (
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// keygen is `images keygen`: a cosign-compatible ECDSA P-256 key pair,
// encrypted as cosign does when COSIGN_PASSWORD is set, and a signers.json
// that trusts its public key. Existing files are never overwritten, and the
// private key is never printed.
func keygen(args []string) error {
	fs := flag.NewFlagSet("images keygen", flag.ContinueOnError)
	out := fs.String("out", "openfief-signing", "file prefix: writes PREFIX.key (0600), PREFIX.pub and PREFIX.signers.json")
	signerName := fs.String("name", "openfief-release", "the signer's name in PREFIX.signers.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var pf cryptoutils.PassFunc
	if pw, ok := os.LookupEnv("COSIGN_PASSWORD"); ok {
		pf = func(bool) ([]byte, error) { return []byte(pw), nil }
	}
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	if err != nil {
		return err
	}
	signers, err := json.MarshalIndent(map[string]any{"signers": []any{map[string]string{"name": *signerName, "publicKey": string(pub)}}}, "", "  ")
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{*out + ".key", priv, 0o600},
		{*out + ".pub", pub, 0o644},
		{*out + ".signers.json", append(signers, '\n'), 0o644},
	}
	for _, f := range files {
		if _, err := os.Stat(f.name); err == nil {
			return fmt.Errorf("%s exists; not overwriting a key", f.name)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for _, f := range files {
		fh, err := os.OpenFile(f.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return err
		}
		_, werr := fh.Write(f.data)
		if err := fh.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return werr
		}
		fmt.Println("wrote", f.name)
	}
	if pf == nil {
		fmt.Println("the private key is not encrypted: set COSIGN_PASSWORD to encrypt the next one")
	}
	return nil
}
