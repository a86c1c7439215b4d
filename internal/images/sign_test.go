//go:build heavy

package images

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
)

// TestSignedImagesVerify signs the pushed images with a key file as
// `make sign` does and checks them the way the platform does: the
// operator's PolicyVerifier and `openfief plugin verify` admit the plugins
// when the owner trusts the key, every image carries a signature by it, and
// an image signed by another key is refused by both.
func TestSignedImagesVerify(t *testing.T) {
	res := sharedBuild(t)
	ctx := context.Background()
	host := newRegistry(t)
	dir := t.TempDir()
	signer := keySigner(t, dir, "release", nil)
	pushed, err := Push(ctx, res, host, PushOptions{Tag: res.Source.Tag()})
	if err != nil {
		t.Fatal(err)
	}
	if err := Sign(ctx, pushed, signer, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	signers := filepath.Join(dir, "release.signers.json")
	raw, err := os.ReadFile(signers)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := trust.NewPolicy(raw)
	if err != nil {
		t.Fatal(err)
	}
	iv, err := trust.NewImageVerifier(policy)
	if err != nil {
		t.Fatal(err)
	}
	pv := trust.NewPolicyVerifier(iv, policy)
	for _, p := range pushed {
		ref, err := plugins.ParseImageRef(p.Ref)
		if err != nil {
			t.Fatal(err)
		}
		signed, _, err := iv.Verify(ctx, ref)
		if err != nil || len(signed.Signatures) != 1 {
			t.Errorf("%s: %d signatures, %v", p.Name, len(signed.Signatures), err)
		}
		b, _ := res.Get(p.Name)
		if b.Spec.ManifestFile == "" {
			continue
		}
		manifest := signed.Manifest
		if manifest == nil {
			t.Fatalf("%s: no signed manifest label read", p.Name)
		}
		if v := pv.Check(ctx, ref, manifest); !v.Verified() || v.Reason != v1alpha1.ReasonSignedByTrustedSigner || v.Signer != "release" {
			t.Errorf("%s: PolicyVerifier %+v", p.Name, v)
		}
		out, code := openfief(t, "plugin", "verify", ref.String(), "--signers", signers)
		if code != cli.ExitOK || !strings.Contains(out, "Result:     SignedByTrustedSigner") || !strings.Contains(out, "Signer:     release (Owner, public key)") {
			t.Errorf("%s: openfief plugin verify exit %d:\n%s", p.Name, code, out)
		}
	}

	// nbp-fx under another label (another digest: the verifier trusts a
	// digest, wherever it is), signed only by a key the owner does not trust.
	nbp, _ := res.Get("nbp-fx")
	relabelled, err := WithManifestLabel(nbp.Index, `{"capabilities":["connector"],"egress":["api.nbp.pl","static.nbp.pl"]}`)
	if err != nil {
		t.Fatal(err)
	}
	stranger := keySigner(t, t.TempDir(), "stranger", nil)
	other, err := PushIndex(ctx, host+"/openfief/nbp-fx", relabelled, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stranger.Sign(ctx, other); err != nil {
		t.Fatal(err)
	}
	if v := pv.Check(ctx, other, nil); v.Verified() || v.Reason != v1alpha1.ReasonUnsigned {
		t.Errorf("an image signed by another key: PolicyVerifier %+v", v)
	}
	if out, code := openfief(t, "plugin", "verify", other.String(), "--signers", signers); code != cli.ExitUnsigned {
		t.Errorf("an image signed by another key: openfief plugin verify exit %d:\n%s", code, out)
	}
}

// openfief runs the CLI in-process and returns its output and exit code.
func openfief(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	return out.String(), code
}
