package cosign

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	sigstoretuf "github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// rotation is a TUF repository and two virtual Sigstores, the second the
// one the repository's rotated root publishes, and a verifier's start: root
// version 1 of the repository and the first Sigstore's trusted root.
type rotation struct {
	repo         *cosigntest.TUFRepo
	first, later *cosigntest.Keyless
	start        TrustRoot
}

func newRotation(t *testing.T) rotation {
	t.Helper()
	r := rotation{
		repo:  cosigntest.NewTUFRepo(t),
		first: cosigntest.NewKeyless(t, testIssuer, testSubject),
		later: cosigntest.NewKeyless(t, testIssuer, testSubject),
	}
	start, err := NewStartTrustRoot(r.repo.Root(1), cosigntest.TrustedRootJSON(t, r.first.VS))
	if err != nil {
		t.Fatal(err)
	}
	r.start = start
	return r
}

func update(t *testing.T, from TrustRoot, data map[string]string) (TrustRoot, error) {
	t.Helper()
	files, err := plugins.ParseTrustRootFiles(data)
	if err != nil {
		t.Fatalf("ParseTrustRootFiles: %v", err)
	}
	return from.Update(files, plugins.TrustRootFingerprint(data), time.Now())
}

// signedBy reports whether a verifier over tr finds ref signed.
func signedBy(t *testing.T, tr TrustRoot, ref plugins.ImageRef) bool {
	t.Helper()
	v, err := NewVerifier(WithTrustedMaterial(tr.Material), WithSCTRequired(false), WithTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := v.Verify(context.Background(), ref)
	if err != nil {
		t.Fatalf("Verify(%s): %v", ref, err)
	}
	return len(got.Signatures) > 0
}

// TestTrustRootRotation: a keyless signature made through a second virtual
// Sigstore is refused under the start and accepted once the TUF repository's
// rotated root (version 2, signed by root keys 1 and 2) publishes that
// Sigstore's trusted_root.json; the first Sigstore's signature is then no
// longer trusted. The result names its source and digest, and starts the
// next update: a later publication through root 2 applies without
// repeating 2.root.json.
func TestTrustRootRotation(t *testing.T) {
	r := newRotation(t)
	reg := cosigntest.NewRegistry(t, true)
	ref := reg.PushImage(t, "plugins/rotated", cosigntest.ManifestLabel(t, testManifest))
	reg.Sign(t, ref, r.later)
	old := reg.PushImage(t, "plugins/old", cosigntest.ManifestLabel(t, testManifest))
	reg.Sign(t, old, r.first)

	if signedBy(t, r.start, ref) {
		t.Fatal("the second Sigstore's signature verified before the update")
	}
	if !signedBy(t, r.start, old) {
		t.Fatal("the first Sigstore's signature did not verify under the start")
	}

	r.repo.RotateRoot(t)
	laterRoot := cosigntest.TrustedRootJSON(t, r.later.VS)
	data := r.repo.Publish(t, laterRoot)
	got, err := update(t, r.start, data)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if !signedBy(t, got, ref) {
		t.Error("the second Sigstore's signature did not verify after the update")
	}
	if signedBy(t, got, old) {
		t.Error("the first Sigstore's signature still verified after the update")
	}
	want := plugins.TrustRootStatus{Source: plugins.TrustRootFromConfigMap, SHA256: sha256Hex(laterRoot),
		ConfigMap: plugins.TrustRootFingerprint(data), RootVersion: 2, TargetsVersion: 1}
	if got.Status != want {
		t.Errorf("Status = %+v, want %+v", got.Status, want)
	}
	if _, err := plugins.EncodeTrustRootStatus(got.Status); err != nil {
		t.Errorf("the status does not encode: %v", err)
	}

	// The next publication, from root 2 on: the chain is not needed again.
	next := r.repo.Publish(t, laterRoot)
	delete(next, "2.root.json")
	again, err := update(t, got, next)
	if err != nil {
		t.Fatalf("Update from root 2: %v", err)
	}
	if again.Status.TargetsVersion != 2 || again.Status.RootVersion != 2 {
		t.Errorf("Status = %+v, want targets version 2 through root 2", again.Status)
	}
}

// TestTrustRootRefused: what does not verify against the root trusted now
// is refused, naming the file, and changes nothing.
func TestTrustRootRefused(t *testing.T) {
	r := newRotation(t)
	r.repo.RotateRoot(t)
	laterRoot := cosigntest.TrustedRootJSON(t, r.later.VS)
	good := r.repo.Publish(t, laterRoot)

	stranger := cosigntest.NewTUFRepo(t)
	stranger.RotateRoot(t)
	foreign := stranger.Publish(t, laterRoot)

	// A root 2 made by someone without root 1's key: its own keys only.
	impostor := cosigntest.NewTUFRepo(t)
	impostor.RotateRoot(t)
	forged := r.repo.Publish(t, laterRoot)
	forged["2.root.json"] = string(impostor.Root(2))

	tampered := clone(good)
	tampered[plugins.TrustRootTargetKey] = strings.Replace(namesLocalRekor(t, laterRoot), "rekor.localhost", "rekor.example", 1)

	withoutChain := clone(good)
	delete(withoutChain, "2.root.json")

	noCA := r.repo.Publish(t, withoutFulcio(t, laterRoot))

	for name, c := range map[string]struct {
		data map[string]string
		file string
	}{
		"another repository":       {data: foreign, file: "2.root.json"},
		"root not signed by 1":     {data: forged, file: "2.root.json"},
		"target not the signed":    {data: tampered, file: plugins.TrustRootTargetKey},
		"rotated keys, no chain":   {data: withoutChain, file: plugins.TrustRootTimestampKey},
		"no certificate authority": {data: noCA, file: plugins.TrustRootTargetKey},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := update(t, r.start, c.data)
			if !errors.Is(err, ErrTrustRootRefused) {
				t.Fatalf("Update = %+v, %v; want ErrTrustRootRefused", got.Status, err)
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), c.file) {
				t.Errorf("the error does not name %s: %v", c.file, err)
			}
		})
	}

	// Rollback: once version 3 is trusted, version 2's files are refused.
	applied, err := update(t, r.start, r.repo.Publish(t, laterRoot))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := update(t, applied, good); !errors.Is(err, ErrTrustRootRefused) || !strings.Contains(err.Error(), "older") {
		t.Errorf("an older timestamp: %v, want refused as older", err)
	}
}

// TestTrustRootExpiryNotChecked: metadata past its expiry date still
// verifies (the admin chose when to copy it; the CAs' and logs' own
// validity bounds every signature).
func TestTrustRootExpiryNotChecked(t *testing.T) {
	r := newRotation(t)
	r.repo.WithExpiry(time.Now().Add(-24 * time.Hour)).RotateRoot(t)
	if _, err := update(t, r.start, r.repo.Publish(t, cosigntest.TrustedRootJSON(t, r.later.VS))); err != nil {
		t.Errorf("expired metadata: %v, want it applied", err)
	}
}

// TestEmbeddedTrustRoot: the binary's start is the public-good
// trusted_root.json with sigstore-go's embedded TUF root of the public-good
// repository, which the admin's root chain continues.
func TestEmbeddedTrustRoot(t *testing.T) {
	tr, err := EmbeddedTrustRoot()
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status.Source != plugins.TrustRootEmbedded || tr.Status.SHA256 != publicGoodRootSHA256 {
		t.Errorf("Status = %+v, want the embedded root %s", tr.Status, publicGoodRootSHA256)
	}
	md, err := metadata.Root().FromBytes(sigstoretuf.DefaultRoot())
	if err != nil {
		t.Fatal(err)
	}
	// Version 14 is the one sigstore-go v1.3.0 embeds; a newer sigstore-go
	// may move it on, never back.
	if md.Signed.Version < 14 {
		t.Errorf("the embedded TUF root is version %d, want 14 or later", md.Signed.Version)
	}
	if _, err := (TrustRoot{}).Update(plugins.TrustRootFiles{}, "", time.Now()); !errors.Is(err, ErrTrustRootRefused) {
		t.Errorf("the zero TrustRoot updated: %v", err)
	}
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// namesLocalRekor returns b, a virtual Sigstore's trusted_root.json, which
// names its Rekor log rekor.localhost.
func namesLocalRekor(t *testing.T, b []byte) string {
	t.Helper()
	if !strings.Contains(string(b), "rekor.localhost") {
		t.Fatal("the virtual Sigstore's root names no rekor.localhost")
	}
	return string(b)
}

// withoutFulcio drops the certificate authorities from a trusted_root.json.
func withoutFulcio(t *testing.T, b []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "certificateAuthorities")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzTrustRootUpdate feeds an administrator's ConfigMap files, mutated, to
// the TUF verification. It must never panic, every refusal wraps
// ErrTrustRootRefused, and whatever is accepted holds exactly the
// trusted_root.json the repository signed: no change to the files yields
// a root the repository's keys did not sign.
func FuzzTrustRootUpdate(f *testing.F) {
	repo := cosigntest.NewTUFRepo(f)
	first := cosigntest.NewKeyless(f, testIssuer, testSubject)
	start, err := NewStartTrustRoot(repo.Root(1), cosigntest.TrustedRootJSON(f, first.VS))
	if err != nil {
		f.Fatal(err)
	}
	repo.RotateRoot(f)
	signed := cosigntest.TrustedRootJSON(f, cosigntest.NewKeyless(f, testIssuer, testSubject).VS)
	good := repo.Publish(f, signed)
	names := []string{"2.root.json", plugins.TrustRootTimestampKey, plugins.TrustRootSnapshotKey, plugins.TrustRootTargetsKey, plugins.TrustRootTargetKey}
	for i := range names {
		f.Add(uint8(i), []byte(good[names[i]]))
		f.Add(uint8(i), []byte(`{"signed":{},"signatures":[]}`))
	}
	f.Add(uint8(0), []byte(nil))
	f.Fuzz(func(t *testing.T, which uint8, content []byte) {
		data := clone(good)
		data[names[int(which)%len(names)]] = string(content)
		files, err := plugins.ParseTrustRootFiles(data)
		if err != nil {
			return
		}
		got, err := start.Update(files, plugins.TrustRootFingerprint(data), time.Now())
		if err != nil {
			if !errors.Is(err, ErrTrustRootRefused) {
				t.Fatalf("error %v does not wrap ErrTrustRootRefused", err)
			}
			return
		}
		if got.Status.SHA256 != sha256Hex(signed) || data[plugins.TrustRootTargetKey] != string(signed) {
			t.Fatalf("accepted a trusted_root.json the repository did not sign: %q", data[plugins.TrustRootTargetKey])
		}
	})
}
