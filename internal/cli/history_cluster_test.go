//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestHistoryAndRollback checks `plugin history` and `plugin rollback`
// against a Plugin whose status.history is written by hand as the operator
// writes it: the table and -o json; a rollback to the previous revision
// writes its image and signed label and keeps the config; one asking for
// more than the grant holds says what waits for approval; and, writing
// nothing, an unknown revision (naming --to and the revisions there are), a
// revision whose image no trusted signer signed any more, one whose signed
// manifest is not the one the history records, and a rollback to what the
// spec already asks for.
func TestHistoryAndRollback(t *testing.T) {
	k := newKube(t)
	ctx := context.Background()
	im := newImages(t)
	v1 := im.signed(t, "plugins/fx", fxV1)
	v2 := im.signed(t, "plugins/fx", fxV2)
	// v0 was signed by a key the owner no longer trusts.
	v0 := im.reg.PushImage(t, "plugins/fx", cosigntest.ManifestLabel(t, fxV1))
	im.reg.Sign(t, v0, cosigntest.NewKey(t))
	config := tempFile(t, "config.yaml", fxConfig)
	const name = "fx-rollback"
	expect(t, openfief(t, k, runOpts{}, "plugin", "install", name, "--image", v1.String(), "--config", config, "--signers", im.signers), ExitOK)
	expect(t, openfief(t, k, runOpts{}, "plugin", "upgrade", name, "--image", v2.String(), "--signers", im.signers), ExitOK)
	expect(t, openfief(t, k, runOpts{}, "plugin", "approve", name, "--yes"), ExitOK)

	p := k.plugin(t, name)
	created := p.CreationTimestamp.Time
	at := func(h int) metav1.Time { return metav1.NewTime(created.Add(time.Duration(h) * time.Hour)) }
	rev := func(n int64, ref plugins.ImageRef, m plugins.Manifest, first, last int) v1alpha1.PluginRevision {
		r := v1alpha1.PluginRevision{Revision: n, Image: ref.String(), ManifestDigest: plugins.ManifestDigest(m), Signer: "owner",
			Trust: v1alpha1.ReasonSignedByTrustedSigner, FirstRan: at(first)}
		if last > 0 {
			l := at(last)
			r.LastRan = &l
		}
		return r
	}
	p.Status = v1alpha1.PluginStatus{
		ObservedGeneration: p.Generation,
		Deployed:           &v1alpha1.DeployedVersion{Image: v2.String(), Manifest: apiconv.ManifestToAPI(fxV2), Signer: "owner", Trust: v1alpha1.ReasonSignedByTrustedSigner},
		History: []v1alpha1.PluginRevision{
			rev(4, v2, fxV2, 3, 0),
			rev(3, v1, fxV1, 2, 3),
			rev(2, v0, fxV1, 1, 2),
			rev(1, v1, fxV2, 0, 1), // a manifest digest that is not v1's label
		},
	}
	if err := k.c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	now := runOpts{now: created.Add(4 * time.Hour)}
	unchanged := func(t *testing.T) {
		t.Helper()
		if got := k.plugin(t, name); got.Spec.Image != v2.String() {
			t.Errorf("spec.image %s, want it unchanged: %s", got.Spec.Image, v2)
		}
	}

	t.Run("history", func(t *testing.T) {
		r := openfief(t, k, now, "plugin", "history", name)
		expect(t, r, ExitOK, "REVISION   IMAGE", "SignedByTrustedSigner by owner")
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if len(lines) != 5 {
			t.Fatalf("%d lines, want a header and 4 revisions:\n%s", len(lines), r.out)
		}
		if f := strings.Fields(lines[1]); f[0] != "4" || f[1] != shortImage(v2.String()) || f[len(f)-1] != "running" {
			t.Errorf("newest row %q", lines[1])
		}
		if f := strings.Fields(lines[4]); f[0] != "1" || !strings.HasSuffix(lines[4], "(3h ago)") {
			t.Errorf("oldest row %q", lines[4])
		}
	})
	t.Run("history -o json", func(t *testing.T) {
		r := openfief(t, k, now, "plugin", "history", name, "-o", "json")
		expect(t, r, ExitOK)
		var doc historyReport
		if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
		if doc.Name != name || doc.Running != v2.String() || len(doc.Items) != 4 || !doc.Items[0].Running || doc.Items[1].Running ||
			doc.Items[1].Image != v1.String() || doc.Items[1].ManifestDigest != plugins.ManifestDigest(fxV1) {
			t.Errorf("history -o json:\n%s", r.out)
		}
	})
	t.Run("unknown plugin", func(t *testing.T) {
		expect(t, openfief(t, k, now, "plugin", "history", "fx-nobody"), ExitNotFound, `plugin "fx-nobody" not found`)
		expect(t, openfief(t, k, now, "plugin", "rollback", "fx-nobody", "--signers", im.signers), ExitNotFound, `plugin "fx-nobody" not found`)
	})
	t.Run("unknown revision", func(t *testing.T) {
		r := openfief(t, k, now, "plugin", "rollback", name, "--to", "7", "--signers", im.signers)
		expect(t, r, ExitNotFound, "--to 7: plugin fx-rollback has no revision 7", "revisions 4, 3, 2, 1", "openfief plugin history fx-rollback")
		unchanged(t)
	})
	t.Run("a signer no longer trusted", func(t *testing.T) {
		r := openfief(t, k, now, "plugin", "rollback", name, "--to", "2", "--signers", im.signers)
		expect(t, r, ExitUnsigned, "Unsigned")
		unchanged(t)
	})
	t.Run("a manifest the history does not record", func(t *testing.T) {
		r := openfief(t, k, now, "plugin", "rollback", name, "--to", "1", "--signers", im.signers)
		expect(t, r, ExitManifestMismatch, "revision 1 of plugin fx-rollback", "not the one the history records")
		unchanged(t)
	})
	t.Run("to the revision that runs", func(t *testing.T) {
		r := openfief(t, k, now, "plugin", "rollback", name, "--to", "4", "--signers", im.signers)
		expect(t, r, ExitNothingToDo, "already asks for revision 4's image")
	})

	// The previous revision, 3: v1 asks for less than the grant holds.
	r := openfief(t, k, now, "plugin", "rollback", name, "--signers", im.signers)
	expect(t, r, ExitOK, "plugin/fx-rollback rolled back to revision 3: "+shortImage(v2.String())+" -> "+shortImage(v1.String()),
		"SignedByTrustedSigner by owner", "Approval:   nothing pending")
	got := k.plugin(t, name)
	if got.Spec.Image != v1.String() || !apiconv.ManifestFromAPI(got.Spec.Manifest).Equal(fxV1) {
		t.Errorf("spec after the rollback: %s %+v", got.Spec.Image, got.Spec.Manifest)
	}
	if cfg := string(got.Spec.Config.Raw); cfg != `{"currency":"PLN"}` {
		t.Errorf("config not kept: %s", cfg)
	}

	// With the grant narrowed to v1's hosts, going back to revision 4 (v2)
	// asks for static.nbp.pl:8443 again: it waits for approval.
	g := k.grant(t, name)
	g.Spec.Egress = []v1alpha1.EgressHost{"api.nbp.pl"}
	if err := k.c.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	r = openfief(t, k, now, "plugin", "rollback", name, "--to", "4", "--signers", im.signers)
	expect(t, r, ExitOK, "rolled back to revision 4", "Pending approval (requested, not granted):", "static.nbp.pl:8443", "openfief plugin approve fx-rollback")
	if got := k.plugin(t, name); got.Spec.Image != v2.String() {
		t.Errorf("spec.image %s after the rollback to revision 4, want %s", got.Spec.Image, v2)
	}
}
