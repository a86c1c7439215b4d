package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestSigstoreRootFromCluster: the CLI checks images against the cluster
// with the Sigstore root of openfief-sigstore-root, verified from its own
// start as the operator verifies it. A keyless image signed through a
// second virtual Sigstore is refused as Unsigned without the ConfigMap,
// admitted with the files of the TUF repository's rotated root that
// publishes it, and refused again when the ConfigMap holds another
// repository's files, which the report says did not verify.
func TestSigstoreRootFromCluster(t *testing.T) {
	const issuer, subject = "https://issuer.example", "https://github.com/example/plugin/.github/workflows/release.yml@refs/heads/main"
	repo := cosigntest.NewTUFRepo(t)
	first, later := cosigntest.NewKeyless(t, issuer, subject), cosigntest.NewKeyless(t, issuer, subject)
	start, err := cosign.NewStartTrustRoot(repo.Root(1), cosigntest.TrustedRootJSON(t, first.VS))
	if err != nil {
		t.Fatal(err)
	}
	reg := cosigntest.NewRegistry(t, true)
	ref := reg.PushImage(t, "plugins/rotated", cosigntest.ManifestLabel(t, plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}}))
	reg.Sign(t, ref, later)

	env := NewEnv(Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	env.Now = time.Now
	env.verifierOptions = []cosign.Option{cosign.WithSCTRequired(false)} // the virtual Sigstore issues no SCTs
	env.trustRootStart = &start
	signers := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
		Data:       map[string]string{plugins.OwnerSignersKey: `{"signers":[{"name":"owner-keyless","issuer":"` + issuer + `","subject":"` + subject + `"}]}`},
	}
	check := func(t *testing.T, rootData map[string]string) (imageCheck, trust) {
		t.Helper()
		b := fake.NewClientBuilder().WithObjects(signers)
		if rootData != nil {
			b = b.WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: plugins.TrustRootConfigMap, Namespace: plugins.Namespace}, Data: rootData})
		}
		tr, err := env.policyFromCluster(context.Background(), b.Build(), "")
		if err != nil {
			t.Fatal(err)
		}
		res, err := env.checkImage(context.Background(), ref, tr, trustFlags{})
		if err != nil {
			t.Fatal(err)
		}
		return res, tr
	}

	res, tr := check(t, nil)
	if res.Verification.Reason != v1alpha1.ReasonUnsigned || tr.sigstoreNote != "" {
		t.Errorf("without the ConfigMap: %s (%s), note %q; want Unsigned and no note", res.Verification.Reason, res.Verification.Message, tr.sigstoreNote)
	}

	repo.RotateRoot(t)
	data := repo.Publish(t, cosigntest.TrustedRootJSON(t, later.VS))
	res, tr = check(t, data)
	if res.Verification.Reason != v1alpha1.ReasonSignedByTrustedSigner {
		t.Errorf("with the rotated root: %s (%s), want SignedByTrustedSigner", res.Verification.Reason, res.Verification.Message)
	}
	if !strings.Contains(tr.sigstoreNote, "TUF root version 2") || !strings.Contains(describeTrusted(tr), tr.sigstoreNote) {
		t.Errorf("the report names %q (%s), want the ConfigMap's root", tr.sigstoreNote, describeTrusted(tr))
	}

	stranger := cosigntest.NewTUFRepo(t)
	stranger.RotateRoot(t)
	res, tr = check(t, stranger.Publish(t, cosigntest.TrustedRootJSON(t, later.VS)))
	if res.Verification.Reason != v1alpha1.ReasonUnsigned || !strings.Contains(tr.sigstoreNote, "did not verify: trust root refused: 2.root.json") {
		t.Errorf("another repository's files: %s, note %q; want Unsigned under the embedded root, and why", res.Verification.Reason, tr.sigstoreNote)
	}
}
