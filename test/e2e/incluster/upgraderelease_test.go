//go:build cluster

package incluster

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// testUpgradeFromRelease installs release A, made from an earlier commit by
// its own tooling (makeReleaseA), on a node with no platform, with release
// A's own CLI; runs a connector and a view on it until the core holds the
// connector's rates and the view has exported them; then upgrades to the
// tree's release with `openfief platform upgrade` and checks that no plugin
// pod, container, Deployment revision or ReplicaSet changed, that the core
// calls both plugins again, that the core's record kept its rows and the
// view's place and is at the tree's schema version (read from the core's
// database on the node's volume), and that the Plugins and PluginGrants
// stored under A read back with the tree's types.
//
// Then the downgrade rule: going back is refused without --allow-downgrade;
// with it, an overlay whose core knows fewer schema versions than the
// record is at is refused before anything is applied (B's overlay saying
// its core knows one less), and release A, whose core knows the record's
// schema, is allowed (the CLI warns that A's overlay does not say which
// schema its core knows), with the same checks as the upgrade. When the
// tree's migrations have moved past A's, going back to A is not tried: the
// rule refuses it, and A's overlay cannot say so. It uninstalls everything
// at the end.
//
// The tree's release names its own check probe as the isolation gate, which
// is in every plugin's pod template: B's operator keeps the gate each
// running plugin has (A's probe, of the same repository) until that
// plugin's next rollout, so the upgrade restarts no plugin
// (internal/operator/gatekeep.go); a plugin installed under B takes B's.
func testUpgradeFromRelease(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	const (
		connector = "up-fx"
		view      = "up-view"
	)
	noPlatform(t, e)
	reclaimVolumes(t, e)
	a := makeReleaseA(t, e)
	b := e.treeRelease(t)

	if a.refs[overlay.CheckProbe] == b.res.Images[overlay.CheckProbe] {
		t.Errorf("releases A and B have the same check probe %s: the phase shows nothing of the gate kept across the upgrade", a.refs[overlay.CheckProbe])
	}
	t.Logf("the isolation gate: release A's check probe %s, B's %s", a.refs[overlay.CheckProbe].Digest(), b.res.Images[overlay.CheckProbe].Digest())

	adminA := filepath.Join(e.work, "release-a-admin")
	must(t, devstack.WriteDevOverlay(adminA, "../release-a", devstack.DevOverlay{
		InsecureRegistries: []string{e.preg.bridge}, SyncInterval: testSyncInterval,
	}))
	adminB := filepath.Join(e.work, "release-b-admin")
	relB, err := filepath.Rel(adminB, b.out)
	must(t, err)
	must(t, devstack.WriteDevOverlay(adminB, relB, devstack.DevOverlay{
		InsecureRegistries: []string{e.preg.bridge}, SyncInterval: testSyncInterval,
	}))

	// Cleanups run last first: the plugins and the Secret, then the platform.
	installed := false
	t.Cleanup(func() {
		if installed {
			code, out := e.cli(context.Background(), "platform", "uninstall", "--yes", "--delete-data", "--timeout", "3m")
			t.Logf("openfief platform uninstall --delete-data (upgrade-release): exit %d\n%s", code, out)
		}
	})
	t.Cleanup(func() { deleteSecret(t, e, viewSecret) })
	t.Cleanup(func() { uninstallPlugins(t, e, []string{view, connector}) })

	// Release A, installed by its own CLI.
	start := time.Now()
	installed = true
	cmd := exec.CommandContext(ctx, a.cli, "--kubeconfig", e.kubeconfig, "platform", "install", "--overlay", adminA, "--timeout", "5m")
	out, err := cmd.CombinedOutput()
	t.Logf("$ openfief (release A) platform install --overlay %s (%v) in %s\n%s", adminA, err, time.Since(start).Round(100*time.Millisecond), out)
	if err != nil {
		t.Fatalf("release A's openfief platform install: %v", err)
	}
	checkPlatformAt(t, e, a.refs, releaseAVersion)
	trustOwnerKey(t, e)

	// A connector and a view, and what the core keeps of them.
	fx := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	openfief(t, e.kubeconfig, "plugin", "install", connector, "--image", fx.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "approve", connector, "--yes")
	openfief(t, e.kubeconfig, "plugin", "wait", connector, "--for", "Running", "--timeout", "3m")
	waitCoreStatus(t, e, connector, 2*time.Minute, "nbp-fx's rates stored by release A's core", func(s coreStatus) bool {
		return s.succeeded && s.fxRates > 0
	})
	_, err = e.cs.CoreV1().Secrets(plugins.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: viewSecret, Namespace: plugins.Namespace},
		Data:       map[string][]byte{"username": []byte(e.dav.Username), "password": []byte(e.dav.Password)},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	must(t, err)
	viewRef := e.preg.publish(t, "plugins/webdav-csv", pluginManifest(t, e.root, "webdav-csv"), map[string][]byte{
		"plugin":                            buildStatic(t, e.root, "./plugins/webdav-csv"),
		"etc/ssl/certs/ca-certificates.crt": e.dav.CAPEM(),
	}, e.signer)
	installView(t, e, view, viewRef, writeViewConfig(t, e.dav.FolderURL()))
	names := []string{connector, view}
	calls := map[string]coreStatus{}
	before := map[string]pluginState{}
	for _, n := range names {
		calls[n] = waitCalled(t, e, n, time.Time{})
		before[n] = readPluginState(t, e, n)
	}
	rec := waitViewPlaced(t, e, view)
	schemaA, schemaB := rec.schema, latestMigration(t, e)
	t.Logf("release A: %s; the tree's core knows schema versions up to %d", rec, schemaB)

	moves := []struct {
		name, overlay, version string
		refs                   map[string]plugins.ImageRef
		args                   []string
	}{
		{"upgrade A to B", adminB, releaseVersion, b.res.Images, nil},
		{"downgrade B to A", adminA, releaseAVersion, a.refs, []string{"--allow-downgrade"}},
	}
	for _, m := range moves {
		if m.args != nil && schemaB > schemaA {
			// The rule refuses this move (A's core would refuse the
			// record), but release A's overlay does not say which schema
			// versions its core knows: the CLI can only warn. The refusal
			// is checked below with an overlay that says so.
			t.Logf("%s: not tried: the record moved from schema version %d to %d, which release A's core refuses", m.name, schemaA, schemaB)
			checkFewerRefused(t, e, adminB, schemaB)
			continue
		}
		if m.args != nil {
			// Refused without the flag, and nothing changes.
			code, out := e.cli(ctx, "platform", "upgrade", "--overlay", m.overlay, "--timeout", "1m")
			if code != cli.ExitInvalid || !strings.Contains(out, "refusing a downgrade") {
				t.Errorf("%s without --allow-downgrade: exit %d, want %d refusing a downgrade\n%s", m.name, code, cli.ExitInvalid, out)
			}
			checkPlatformAt(t, e, b.res.Images, releaseVersion)
			checkFewerRefused(t, e, adminB, schemaB)
		}
		old := platformPods(t, e)
		start := time.Now()
		args := append([]string{"platform", "upgrade", "--overlay", m.overlay, "--timeout", "5m"}, m.args...)
		code, out := e.cli(ctx, args...)
		took := time.Since(start)
		t.Logf("%s: openfief %s: exit %d in %s\n%s", m.name, strings.Join(args, " "), code, took.Round(100*time.Millisecond), out)
		if code != cli.ExitOK {
			t.Fatalf("%s: openfief platform upgrade exited %d", m.name, code)
		}
		if m.args != nil && !strings.Contains(out, "cannot tell whether the core of "+m.version+" knows") {
			t.Errorf("%s: allowed without saying that release A's core does not name the schema it knows", m.name)
		}
		done := time.Now()
		waitPlatformRolled(t, e, m.refs, m.version, old)
		rolled := time.Since(start)
		restarts := 0
		// The new core exports to the view once when it starts (nothing
		// new is imported: the stand-in's rates are stored already), which
		// may be before the command returned.
		coreUp := coreStarted(t, e)
		for _, n := range names {
			since := done
			if n == view {
				since = coreUp
			}
			now := waitCalled(t, e, n, since)
			if n == connector {
				checkStored(t, n, calls[n], now)
			}
			calls[n] = now
			after := readPluginState(t, e, n)
			checkPluginUntouched(t, n, before[n], after)
			if after.pod != before[n].pod {
				restarts++
			}
			restarts += int(after.restarts)
		}
		now := waitViewPlaced(t, e, view)
		checkRecordKept(t, m.name, rec, now)
		rec = now
		checkStoredObjects(t, e, names)
		t.Logf("%s: platform upgrade returned in %s, every Deployment rolled in %s; plugin pods replaced or restarted: %d; %s",
			m.name, took.Round(100*time.Millisecond), rolled.Round(100*time.Millisecond), restarts, now)
	}
	if rec.schema != schemaB {
		t.Errorf("the record's schema is at %d after the moves, want the tree's %d", rec.schema, schemaB)
	}
}

// checkFewerRefused checks the downgrade rule's refusal: with
// --allow-downgrade, an overlay like installed (B's) whose core knows one
// schema version less than the record is at is refused before anything
// is applied, and the platform stays at B.
func checkFewerRefused(t *testing.T, e *platformEnv, installed string, schema int) {
	t.Helper()
	b := e.treeRelease(t)
	fewer := coreKnowsFewer(t, e, installed, schema-1)
	code, out := e.cli(context.Background(), "platform", "upgrade", "--overlay", fewer, "--allow-downgrade", "--timeout", "1m")
	t.Logf("platform upgrade --allow-downgrade to a core that knows schema versions up to %d: exit %d\n%s", schema-1, code, out)
	if code != cli.ExitInvalid || !strings.Contains(out, "it would refuse the record") {
		t.Errorf("platform upgrade --allow-downgrade to a core that knows fewer schema versions: exit %d, want %d refusing it", code, cli.ExitInvalid)
	}
	checkPlatformAt(t, e, b.res.Images, releaseVersion)
}

// coreStarted is when the core's running container started.
func coreStarted(t *testing.T, e *platformEnv) time.Time {
	t.Helper()
	pods := listPods(t, e, "app.kubernetes.io/name="+deploy.CoreDeployment)
	for _, p := range pods {
		for _, st := range p.Status.ContainerStatuses {
			if st.State.Running != nil {
				return st.State.Running.StartedAt.Time
			}
		}
	}
	t.Fatalf("no running core container among %d pods", len(pods))
	return time.Time{}
}

// noPlatform uninstalls the platform with its data when one is installed:
// after the release phase the node has none; run alone, this phase starts
// on the development platform.
func noPlatform(t *testing.T, e *platformEnv) {
	t.Helper()
	owned, err := platform.Owned(context.Background(), mustClient(t, e.c))
	must(t, err)
	if !platform.Installed(owned) {
		return
	}
	code, out := e.cli(context.Background(), "platform", "uninstall", "--yes", "--delete-data", "--timeout", "3m")
	t.Logf("openfief platform uninstall --delete-data (before release A): exit %d\n%s", code, out)
	if code != cli.ExitOK {
		t.Fatalf("openfief platform uninstall exited %d", code)
	}
}

// trustOwnerKey publishes the owner's key in openfief-trusted-signers, as
// the first install of the suite did: the plugins the phase installs are
// signed by it.
func trustOwnerKey(t *testing.T, e *platformEnv) {
	t.Helper()
	ctx := context.Background()
	signers, err := e.signer.SignersJSON("local-owner")
	must(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "openfief-trusted-signers", Namespace: plugins.Namespace},
		Data:       map[string]string{"signers.json": string(signers)},
	}
	_, err = e.cs.CoreV1().ConfigMaps(plugins.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = e.cs.CoreV1().ConfigMaps(plugins.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	must(t, err)
	// The stack's copy for --signers follows the ConfigMap.
	testutil.Eventually(t, 30*time.Second, "the stack's signers file holding the owner's key", func() (bool, string) {
		raw, err := os.ReadFile(e.signersFile)
		return err == nil && string(raw) == string(signers), fmt.Sprintf("%d bytes (%v)", len(raw), err)
	})
}

// coreRecord is what the core's database holds that an upgrade must keep,
// read from its SQLite file on the node's volume.
type coreRecord struct {
	schema int            // the last migration applied
	rows   map[string]int // rows by table, schema_migrations aside
	places map[string]int // each view place's entry number, by instance and kind
}

func (r coreRecord) String() string {
	return fmt.Sprintf("schema version %d, rows %v, view places %v", r.schema, r.rows, r.places)
}

// readCoreRecord opens the core's database read-only where the node keeps
// the core's volume and reads its schema version, its rows and the views'
// places.
func readCoreRecord(t *testing.T, e *platformEnv) (coreRecord, error) {
	t.Helper()
	ctx := context.Background()
	pvc, err := e.cs.CoreV1().PersistentVolumeClaims(plugins.Namespace).Get(ctx, "openfief-core-data", metav1.GetOptions{})
	if err != nil {
		return coreRecord{}, err
	}
	file := filepath.Join(e.c.VolumeDir(pvc.Spec.VolumeName), "core.db")
	if _, err := os.Stat(file); err != nil {
		return coreRecord{}, err
	}
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return coreRecord{}, err
	}
	defer func() { _ = db.Close() }()
	rec := coreRecord{rows: map[string]int{}, places: map[string]int{}}
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&rec.schema); err != nil {
		return coreRecord{}, err
	}
	for _, table := range []string{"batches", "fx_rates"} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
			return coreRecord{}, err
		}
		rec.rows[table] = n
	}
	rows, err := db.QueryContext(ctx, `SELECT instance, kind, seq FROM view_places`)
	if err != nil {
		return coreRecord{}, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var inst, kind string
		var seq int
		if err := rows.Scan(&inst, &kind, &seq); err != nil {
			return coreRecord{}, err
		}
		rec.places[inst+"/"+kind] = seq
	}
	return rec, rows.Err()
}

// waitViewPlaced waits until the core's database holds a place of the view
// past its first entry, and returns the record then.
func waitViewPlaced(t *testing.T, e *platformEnv, view string) coreRecord {
	t.Helper()
	var rec coreRecord
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var err error
		rec, err = readCoreRecord(t, e)
		if err == nil {
			for k, seq := range rec.places {
				if strings.HasPrefix(k, view) && seq > 0 {
					return rec
				}
			}
			err = fmt.Errorf("no place of %s yet: %s", view, rec)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the core's database: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// checkRecordKept fails when a move lost rows or set a view's place back,
// or the schema went back.
func checkRecordKept(t *testing.T, move string, before, after coreRecord) {
	t.Helper()
	if after.schema < before.schema {
		t.Errorf("%s: the record's schema went from %d to %d", move, before.schema, after.schema)
	}
	for table, n := range before.rows {
		if after.rows[table] < n {
			t.Errorf("%s: %s went from %d rows to %d", move, table, n, after.rows[table])
		}
	}
	for k, seq := range before.places {
		if got, ok := after.places[k]; !ok || got < seq {
			t.Errorf("%s: the view's place %s went from %d to %d (kept: %v)", move, k, seq, got, ok)
		}
	}
}

// checkStoredObjects reads the Plugins and PluginGrants the platform
// stored under another release with the tree's types: each is there and
// names what it did.
func checkStoredObjects(t *testing.T, e *platformEnv, names []string) {
	t.Helper()
	ctx := context.Background()
	kc := mustClient(t, e.c)
	var ps v1alpha1.PluginList
	must(t, kc.List(ctx, &ps, client.InNamespace(plugins.Namespace)))
	var gs v1alpha1.PluginGrantList
	must(t, kc.List(ctx, &gs, client.InNamespace(plugins.Namespace)))
	found := map[string]string{}
	for _, p := range ps.Items {
		found[p.Name] = p.Spec.Image
	}
	granted := map[string]bool{}
	for _, g := range gs.Items {
		granted[g.Name] = true
	}
	for _, n := range names {
		if found[n] == "" || !granted[n] {
			t.Errorf("plugin %s: stored Plugin with image %q, grant %v; the stored objects: %v", n, found[n], granted[n], slices.Sorted(maps.Keys(found)))
		}
	}
}

// latestMigration is the last migration of the tree's core, the version a
// record it ran is at.
func latestMigration(t *testing.T, e *platformEnv) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.root, "internal", "core", "store", "migrations", "*.sql"))
	must(t, err)
	latest := 0
	for _, f := range files {
		var v int
		if _, err := fmt.Sscanf(filepath.Base(f), "%04d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// coreKnowsFewer writes an overlay over base whose core's Deployment says
// it knows schema versions up to schema only: a release like base with an
// older core, as far as openfief platform upgrade can tell.
func coreKnowsFewer(t *testing.T, e *platformEnv, base string, schema int) string {
	t.Helper()
	dir := filepath.Join(e.work, "release-b-fewer-schemas")
	rel, err := filepath.Rel(dir, base)
	must(t, err)
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(`resources:
  - %s
patches:
  - target: {kind: Deployment, name: %s}
    patch: |-
      - {op: replace, path: /metadata/annotations/%s, value: "%d"}
`, rel, deploy.CoreDeployment, strings.ReplaceAll(deploy.CoreSchemaAnnotation, "/", "~1"), schema)), 0o644))
	return dir
}
