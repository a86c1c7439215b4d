//go:build cluster

package cli

import (
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestUninstall checks `plugin uninstall` removes the Plugin and keeps the
// grant and Secrets, and that --purge also removes the grant and the Secrets
// only that plugin used, keeping one another plugin uses (D-58).
func TestUninstall(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	v1 := im.signed(t, "plugins/fx", fxV1)
	config := tempFile(t, "config.yaml", fxConfig)
	// Three instances of one image: un-a binds its Secret slot to a Secret
	// of its own, un-b and un-c share one.
	for _, name := range []string{"un-a", "un-b", "un-c"} {
		expect(t, openfief(t, k, runOpts{}, "plugin", "install", name, "--image", v1.String(), "--config", config, "--signers", im.signers), ExitOK)
	}
	expect(t, openfief(t, k, runOpts{}, "plugin", "approve", "un-a", "--all", "--secret", "fx-token=un-a-token", "--yes"), ExitOK)
	expect(t, openfief(t, k, runOpts{}, "plugin", "approve", "un-b", "--all", "--secret", "fx-token=un-shared", "--yes"), ExitOK)
	expect(t, openfief(t, k, runOpts{}, "plugin", "approve", "un-c", "--all", "--secret", "fx-token=un-shared", "--yes"), ExitOK)
	for _, s := range []string{"un-a-token", "un-shared"} {
		k.createSecret(t, s)
	}

	t.Run("unknown plugin", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-nobody", "--yes")
		expect(t, r, ExitNotFound, `plugin "un-nobody" not found`)
		r = openfief(t, k, runOpts{}, "plugin", "uninstall", "un-nobody", "--purge", "--yes")
		expect(t, r, ExitNotFound, "nothing of it is left to purge")
	})
	t.Run("no --yes and nobody to ask", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-a", "--purge")
		expect(t, r, ExitNotConfirmed, "plugin/un-a", "plugingrant/un-a", "secret/un-a-token", "--yes")
		if k.plugin(t, "un-a") == nil || k.grant(t, "un-a") == nil || !k.secretExists(t, "un-a-token") {
			t.Error("something was deleted without confirmation")
		}
	})
	t.Run("purge", func(t *testing.T) {
		r := openfief(t, k, runOpts{interactive: true, stdin: "yes\n"}, "plugin", "uninstall", "un-a", "--purge")
		expect(t, r, ExitOK, "This deletes:\n  plugin/un-a", "plugingrant/un-a deleted", "secret/un-a-token deleted")
		if k.plugin(t, "un-a") != nil || k.grant(t, "un-a") != nil || k.secretExists(t, "un-a-token") {
			t.Error("purge left the plugin, its grant or its own Secret")
		}
	})
	t.Run("purge keeps a Secret another plugin uses", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-b", "--purge", "--yes")
		expect(t, r, ExitOK, "Keeps, since other plugins' grants bind them:\n  secret/un-shared (bound by un-c)", "plugingrant/un-b deleted")
		if !k.secretExists(t, "un-shared") {
			t.Error("purge deleted a Secret un-c still uses")
		}
	})
	t.Run("without purge the grant and Secrets stay", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-c", "--yes")
		expect(t, r, ExitOK, "plugin/un-c deleted", "Keeps plugingrant/un-c")
		if k.plugin(t, "un-c") != nil {
			t.Error("the Plugin is still there")
		}
		if k.grant(t, "un-c") == nil || !k.secretExists(t, "un-shared") {
			t.Error("uninstall without --purge removed the grant or a Secret")
		}
	})
	t.Run("purge after the plugin is gone", func(t *testing.T) {
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-c", "--purge", "--yes")
		expect(t, r, ExitOK, "plugingrant/un-c deleted", "secret/un-shared deleted")
		if k.grant(t, "un-c") != nil || k.secretExists(t, "un-shared") {
			t.Error("the grant or the now unused Secret is still there")
		}
	})
}

// TestUninstallPurgeOnlyGrantedSecrets checks purge deletes only Secrets the
// plugin's grant binds. Its first case is a regression test: a vendor's
// manifest asks for a Secret slot named like another component's Secret, and
// the owner never grants it. Purge must delete the Secret the grant bound and
// leave the other component's Secret alone, though no plugin uses it.
func TestUninstallPurgeOnlyGrantedSecrets(t *testing.T) {
	k := newKube(t)
	im := newImages(t)
	greedy := fxV1
	greedy.Secrets = []plugins.SecretMount{{Name: "fx-token", MountPath: "/etc/fx"}, {Name: "un-core-db", MountPath: "/etc/db"}}
	ref := im.signed(t, "plugins/greedy", greedy)
	config := tempFile(t, "config.yaml", fxConfig)
	install := func(name string) {
		t.Helper()
		expect(t, openfief(t, k, runOpts{}, "plugin", "install", name, "--image", ref.String(), "--config", config, "--signers", im.signers), ExitOK)
	}
	k.createSecret(t, "un-core-db") // another component's, not a plugin's

	t.Run("a slot the grant never bound", func(t *testing.T) {
		install("un-greedy")
		expect(t, openfief(t, k, runOpts{}, "plugin", "approve", "un-greedy", "--secret", "fx-token=un-greedy-token", "--yes"), ExitOK)
		k.createSecret(t, "un-greedy-token")
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-greedy", "--purge", "--yes")
		expect(t, r, ExitOK, "secret/un-greedy-token deleted")
		if strings.Contains(r.out, "secret/un-core-db") {
			t.Errorf("purge lists a Secret the grant never bound\n%s", r)
		}
		if !k.secretExists(t, "un-core-db") {
			t.Error("purge deleted another component's Secret that the manifest asked for and the grant never bound")
		}
		if k.secretExists(t, "un-greedy-token") {
			t.Error("purge left the Secret the grant bound")
		}
	})
	t.Run("no grant, no Secret", func(t *testing.T) {
		install("un-ungranted")
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-ungranted", "--purge", "--yes")
		expect(t, r, ExitOK, "plugin/un-ungranted deleted")
		if strings.Contains(r.out, "secret/") || !k.secretExists(t, "un-core-db") {
			t.Errorf("purge of a plugin without a grant touched a Secret\n%s", r)
		}
	})
	t.Run("a grant whose plugin is gone keeps its Secret", func(t *testing.T) {
		for _, name := range []string{"un-orphan", "un-user"} {
			install(name)
			expect(t, openfief(t, k, runOpts{}, "plugin", "approve", name, "--secret", "fx-token=un-orphan-shared", "--yes"), ExitOK)
		}
		k.createSecret(t, "un-orphan-shared")
		expect(t, openfief(t, k, runOpts{}, "plugin", "uninstall", "un-orphan", "--yes"), ExitOK)
		r := openfief(t, k, runOpts{}, "plugin", "uninstall", "un-user", "--purge")
		expect(t, r, ExitNotConfirmed, "Keeps, since other plugins' grants bind them:\n  secret/un-orphan-shared (bound by un-orphan (grant only))")
		r = openfief(t, k, runOpts{}, "plugin", "uninstall", "un-user", "--purge", "--yes")
		expect(t, r, ExitOK, "plugingrant/un-user deleted")
		if !k.secretExists(t, "un-orphan-shared") {
			t.Error("purge deleted a Secret the grant of un-orphan still binds")
		}
		r = openfief(t, k, runOpts{}, "plugin", "uninstall", "un-orphan", "--purge", "--yes")
		expect(t, r, ExitOK, "plugingrant/un-orphan deleted", "secret/un-orphan-shared deleted")
	})
}
