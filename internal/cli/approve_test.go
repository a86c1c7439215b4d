//go:build cluster

package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestApprove checks `plugin approve` shows what is pending, writes the
// grant only when confirmed, approves parts, binds Secrets, and refuses an
// unknown plugin, nothing pending and a missing confirmation.
func TestApprove(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	v1 := im.signed(t, "plugins/fx", fxV1)
	v2 := im.signed(t, "plugins/fx", fxV2)
	config := tempFile(t, "config.yaml", fxConfig)
	expect(t, openfief(t, k, runOpts{}, "plugin", "install", "fx-approve", "--image", v1.String(), "--config", config, "--signers", im.signers), ExitOK)

	t.Run("no --yes and nobody to ask", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve")
		expect(t, r, ExitNotConfirmed, "Egress:        api.nbp.pl:443", "standard input is not a terminal", "--yes")
		if k.grant(t, "fx-approve") != nil {
			t.Error("a grant was written without confirmation")
		}
	})
	t.Run("declined", func(t *testing.T) {
		r := openfief(t, k, runOpts{interactive: true, stdin: "n\n"}, "plugin", "approve", "fx-approve")
		expect(t, r, ExitNotConfirmed, "Approve this for plugin fx-approve? [y/N]", "not confirmed")
		if k.grant(t, "fx-approve") != nil {
			t.Error("a grant was written though declined")
		}
	})
	t.Run("confirmed", func(t *testing.T) {
		r := openfief(t, k, runOpts{interactive: true, stdin: "y\n"}, "plugin", "approve", "fx-approve")
		expect(t, r, ExitOK, "plugingrant/fx-approve created", "Secret slot:   fx-token at /etc/fx, mounting Secret fx-token")
		want := v1alpha1.PluginGrantSpec{
			Capabilities: []v1alpha1.Capability{"connector"},
			Egress:       []v1alpha1.EgressHost{"api.nbp.pl:443"},
			Secrets:      []v1alpha1.SecretGrant{{Name: "fx-token"}},
			DataTiers:    []v1alpha1.DataTier{"rates"},
		}
		if diff := cmp.Diff(want, k.grant(t, "fx-approve").Spec); diff != "" {
			t.Errorf("grant (-want +got):\n%s", diff)
		}
	})
	t.Run("nothing pending", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--yes")
		expect(t, r, ExitNothingToDo, `nothing pending for plugin "fx-approve"`)
	})
	t.Run("flags refused before anything is written", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--all", "--host", "api.nbp.pl", "--yes")
		expect(t, r, ExitUsage, "--all approves everything pending; combine it only with --secret")
		r = openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--secret", "nope=x", "--yes")
		expect(t, r, ExitInvalid, `--secret nope=x: unknown secret slot: the manifest has no Secret slot "nope" (slots: fx-token)`)
		r = openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--capability", "view", "--yes")
		expect(t, r, ExitInvalid, "--capability view: not requested by the plugin's manifest")
	})
	t.Run("unknown plugin", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-nobody", "--yes")
		expect(t, r, ExitNotFound, `plugin "fx-nobody" not found in namespace "openfief"`)
	})
	t.Run("one host of an upgrade", func(t *testing.T) {
		expect(t, openfief(t, k, runOpts{}, "plugin", "upgrade", "fx-approve", "--image", v2.String(), "--signers", im.signers), ExitOK)
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--host", "evil.example.com", "--yes")
		expect(t, r, ExitInvalid, "--host evil.example.com: not requested")
		r = openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--host", "static.nbp.pl:8443", "--yes")
		expect(t, r, ExitOK, "plugingrant/fx-approve configured")
		got := k.grant(t, "fx-approve").Spec.Egress
		if diff := cmp.Diff([]v1alpha1.EgressHost{"api.nbp.pl:443", "static.nbp.pl:8443"}, got); diff != "" {
			t.Errorf("egress (-want +got):\n%s", diff)
		}
	})
	t.Run("rebinding a Secret slot", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--secret", "fx-token=fx-token-account-2", "--yes")
		expect(t, r, ExitOK, "Rebind:        slot fx-token to Secret fx-token-account-2")
		if diff := cmp.Diff([]v1alpha1.SecretGrant{{Name: "fx-token", SecretName: "fx-token-account-2"}}, k.grant(t, "fx-approve").Spec.Secrets); diff != "" {
			t.Errorf("secrets (-want +got):\n%s", diff)
		}
	})
	t.Run("pull secrets", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--pull-secret", "regcred", "--pull-secret", "ghcr-pull", "--yes")
		expect(t, r, ExitOK, "Pull secrets:  ghcr-pull, regcred", "plugingrant/fx-approve configured")
		if diff := cmp.Diff([]string{"ghcr-pull", "regcred"}, k.grant(t, "fx-approve").Spec.ImagePullSecrets); diff != "" {
			t.Errorf("pull secrets (-want +got):\n%s", diff)
		}
		r = openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--pull-secret", "regcred", "--yes")
		expect(t, r, ExitInvalid, `--pull-secret regcred: already granted, not pending: the grant holds pull Secret "regcred" already`)
		r = openfief(t, k, runOpts{}, "plugin", "approve", "fx-approve", "--pull-secret", "Reg_Cred", "--yes")
		expect(t, r, ExitInvalid, "--pull-secret Reg_Cred: invalid secret name")
		r = openfief(t, k, runOpts{}, "plugin", "status", "fx-approve")
		expect(t, r, ExitOK, "Pull secrets:  ghcr-pull, regcred")
	})
}

// TestRevoke checks `plugin revoke` deletes the grant on confirmation and
// refuses a plugin without one.
func TestRevoke(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	v1 := im.signed(t, "plugins/fx", fxV1)
	config := tempFile(t, "config.yaml", fxConfig)
	expect(t, openfief(t, k, runOpts{}, "plugin", "install", "fx-revoke", "--image", v1.String(), "--config", config, "--signers", im.signers), ExitOK)
	expect(t, openfief(t, k, runOpts{}, "plugin", "approve", "fx-revoke", "--yes"), ExitOK)

	r := openfief(t, k, runOpts{}, "plugin", "revoke", "fx-revoke")
	expect(t, r, ExitNotConfirmed, "Egress:        api.nbp.pl:443", "--yes")
	if k.grant(t, "fx-revoke") == nil {
		t.Fatal("the grant went without confirmation")
	}
	r = openfief(t, k, runOpts{}, "plugin", "revoke", "fx-revoke", "--yes")
	expect(t, r, ExitOK, "plugingrant/fx-revoke deleted")
	if k.grant(t, "fx-revoke") != nil {
		t.Error("the grant is still there")
	}
	if k.plugin(t, "fx-revoke") == nil {
		t.Error("revoke removed the Plugin")
	}
	r = openfief(t, k, runOpts{}, "plugin", "revoke", "fx-revoke", "--yes")
	expect(t, r, ExitNotFound, "has no grant to revoke")
}

// webdavView is a view that exports to the owner's own server: it requests
// no host and has one slot for a host of the owner's choosing (OF-36).
var webdavView = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityView}, OwnerEgress: 1}

// TestApproveOwnerHost checks `plugin approve --host` for a host the
// manifest does not request: it fills the manifest's one slot, written to the
// grant's ownerEgress and shown as the owner's; a second is refused naming
// the flag, the host and the rule; approving everything pending never adds
// one; status shows it; revoke removes it with the rest.
func TestApproveOwnerHost(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	v1 := im.signed(t, "plugins/webdav", webdavView)
	r := openfief(t, k, runOpts{}, "plugin", "install", "webdav-oe", "--image", v1.String(), "--signers", im.signers)
	expect(t, r, ExitOK, "It may also reach 1 host(s) of your choosing, such as your own server; add one with: ", "--host HOST")

	r = openfief(t, k, runOpts{}, "plugin", "approve", "webdav-oe", "--yes")
	expect(t, r, ExitOK, "Capabilities:  view", "It may also reach 1 more host(s) of your choosing; name one with --host.")
	if g := k.grant(t, "webdav-oe"); g == nil || len(g.Spec.OwnerEgress) != 0 || len(g.Spec.Egress) != 0 {
		t.Fatalf("approving everything pending wrote %+v, want only the capability", g)
	}
	r = openfief(t, k, runOpts{}, "plugin", "approve", "webdav-oe", "--all", "--yes")
	expect(t, r, ExitNothingToDo, `nothing pending for plugin "webdav-oe"`)

	r = openfief(t, k, runOpts{}, "plugin", "approve", "webdav-oe", "--host", "Cloud.Example.com")
	expect(t, r, ExitNotConfirmed, "Plugin webdav-oe (image ", "  nothing\nThis approves:\n  Your hosts:    cloud.example.com:443 (hosts of your choosing, not requested by the plugin; 1 of 1 slots then used)")
	if g := k.grant(t, "webdav-oe"); len(g.Spec.OwnerEgress) != 0 {
		t.Fatalf("a host was written without confirmation: %v", g.Spec.OwnerEgress)
	}
	r = openfief(t, k, runOpts{}, "plugin", "approve", "webdav-oe", "--host", "Cloud.Example.com", "--yes")
	expect(t, r, ExitOK, "plugingrant/webdav-oe configured")
	got := k.grant(t, "webdav-oe").Spec
	if diff := cmp.Diff(v1alpha1.PluginGrantSpec{Capabilities: []v1alpha1.Capability{"view"}, OwnerEgress: []v1alpha1.EgressHost{"cloud.example.com:443"}}, got); diff != "" {
		t.Errorf("grant (-want +got):\n%s", diff)
	}

	r = openfief(t, k, runOpts{}, "plugin", "approve", "webdav-oe", "--host", "nas.example.org", "--yes")
	expect(t, r, ExitInvalid, "--host nas.example.org: no free slot for a host of your choosing: the manifest does not request nas.example.org:443 and allows 1 host(s) of your choosing, taken by cloud.example.com:443")
	r = openfief(t, k, runOpts{}, "plugin", "approve", "webdav-oe", "--host", "cloud.example.com:443", "--yes")
	expect(t, r, ExitInvalid, "--host cloud.example.com:443: already granted, not pending: cloud.example.com:443 is a host of your choosing the grant holds already")
	r = openfief(t, k, runOpts{}, "plugin", "approve", "webdav-oe", "--host", "192.168.1.10", "--yes")
	expect(t, r, ExitInvalid, "--host 192.168.1.10: invalid egress host")

	r = openfief(t, k, runOpts{}, "plugin", "status", "webdav-oe")
	expect(t, r, ExitOK, "Your hosts:    up to 1 of your choosing", "Your hosts:    cloud.example.com:443", "Pending:      nothing")

	// The vendor's next version has no slot: the grant now holds more than
	// it allows, and status says so.
	v2 := im.signed(t, "plugins/webdav", plugins.Manifest{Capabilities: webdavView.Capabilities})
	r = openfief(t, k, runOpts{}, "plugin", "upgrade", "webdav-oe", "--image", v2.String(), "--signers", im.signers)
	expect(t, r, ExitOK, "Warning: the grant lists 1 hosts of your choosing and the manifest allows 0; this version does not run until you remove 1 from the grant's ownerEgress.")
	r = openfief(t, k, runOpts{}, "plugin", "status", "webdav-oe")
	expect(t, r, ExitOK, "Warning: the grant lists 1 hosts of your choosing and the manifest allows 0")

	r = openfief(t, k, runOpts{}, "plugin", "revoke", "webdav-oe", "--yes")
	expect(t, r, ExitOK, "Your hosts:    cloud.example.com:443", "plugingrant/webdav-oe deleted")
	if k.grant(t, "webdav-oe") != nil {
		t.Error("the grant survived revoke")
	}
}
