//go:build cluster

package incluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/dashboard"
	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// releaseVersion is the version the release phase makes.
const releaseVersion = "v0.99.0-e2e.1"

// testRelease installs the platform as a user installs a release, on the
// node the uninstall phase left empty: `make release` (release.Make, for
// this machine's platform only) builds, pushes, signs and attests every
// image into the node's registry under a publisher key of its own and links
// the catalog pinning nbp-fx into the operator; the owner's overlay over
// the release's directory is installed with `openfief platform install`.
// Then nbp-fx, installed by its catalog name, is Verified, by the release's
// publisher, in `catalog list`, `plugin list`, `plugin status`, the
// dashboard and the Plugin's Events, and runs. The same image re-signed by
// another key, and a catalog that names another publisher for it, are
// refused. It uninstalls the platform again at the end.
func testRelease(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	reclaimVolumes(t, e)

	rel := e.treeRelease(t)
	key, publisher, out, res := rel.key, rel.publisher, rel.out, rel.res
	nbp := res.Images["nbp-fx"]

	// The owner's overlay over the release, as docs/operator.md has it:
	// the release's directory is the base, the admin adds what their
	// cluster needs (here the node's plain-HTTP registry and a short sync).
	admin := filepath.Join(e.work, "release-admin")
	relDir, err := filepath.Rel(admin, out)
	must(t, err)
	must(t, devstack.WriteDevOverlay(admin, relDir, devstack.DevOverlay{InsecureRegistries: []string{e.preg.bridge}, SyncInterval: testSyncInterval}))
	installed := false
	t.Cleanup(func() {
		if installed {
			code, out := e.cli(context.Background(), "platform", "uninstall", "--yes", "--delete-data", "--timeout", "3m")
			t.Logf("openfief platform uninstall --delete-data (release): exit %d\n%s", code, out)
		}
	})
	start := time.Now()
	installed = true
	openfief(t, e.kubeconfig, "platform", "install", "--overlay", admin, "--timeout", "5m")
	t.Logf("release %s installed in %s", releaseVersion, time.Since(start).Round(100*time.Millisecond))
	// The record the development platform's core held, into the new core
	// while its record is empty (no --replace).
	if e.backup != "" {
		openfief(t, e.kubeconfig, "core", "restore", e.backup, "--yes")
		// The new core holds the whole record the backup held: a backup
		// of it now counts as many rows.
		if got := backupRowCount(t, openfief(t, e.kubeconfig, "core", "backup", "-o", filepath.Join(e.work, "core-restored.backup"))); got != e.backupRecordRows {
			t.Errorf("the release's core holds %d rows after the restore, want the backup's %d", got, e.backupRecordRows)
		}
	}
	for name, image := range platformDeployments {
		d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		if got, want := d.Spec.Template.Spec.Containers[0].Image, res.Images[image].String(); got != want {
			t.Errorf("%s runs %s, want the release's %s", name, got, want)
		}
	}

	// The release's own CLI, with its catalog linked in as into its
	// operator: a development CLI (the in-process one) knows no catalog
	// entry, and no ConfigMap gives it one.
	relCLI := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(out, release.CLIFile(images.HostPlatform())), append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
		b, err := cmd.CombinedOutput()
		t.Logf("$ openfief (release %s) %s (%v)\n%s", releaseVersion, strings.Join(args, " "), err, b)
		if err != nil {
			t.Fatalf("the release's openfief %s: %v", strings.Join(args, " "), err)
		}
		return string(b)
	}
	if code, text := e.cli(ctx, "plugin", "install", "fx-dev", "--catalog", "nbp-fx", "--insecure-registry", e.preg.bridge); code != cli.ExitNotFound {
		t.Errorf("a development CLI installed nbp-fx by catalog name: exit %d\n%s", code, text)
	}

	// The catalog of the release's CLI.
	if row := lineWith(relCLI("catalog", "list", "--insecure-registry", e.preg.bridge), "nbp-fx"); !strings.Contains(row, publisher.Name) || !strings.Contains(row, "Verified") {
		t.Errorf("catalog list's nbp-fx row %q: want publisher %s, Verified", row, publisher.Name)
	}
	var listed struct {
		Version string `json:"version"`
		Plugins []struct {
			Name, Publisher, Image, Status string
		} `json:"plugins"`
	}
	listJSON := relCLI("catalog", "list", "-o", "json", "--insecure-registry", e.preg.bridge)
	must(t, json.Unmarshal([]byte(listJSON[strings.Index(listJSON, "{"):]), &listed))
	found := false
	for _, p := range listed.Plugins {
		if p.Name == "nbp-fx" {
			found = p.Publisher == publisher.Name && p.Image == nbp.String() && p.Status == "Verified"
		}
	}
	if !found || listed.Version != releaseVersion {
		t.Errorf("catalog list -o json: %+v, want release %s with nbp-fx at %s, Verified by %s", listed, releaseVersion, nbp, publisher.Name)
	}

	// plugin verify with the release's signed catalog file: Verified, by
	// the publisher, with the SBOM and provenance the release attached.
	verify := relCLI("plugin", "verify", nbp.String(), "--catalog-file", filepath.Join(out, release.CatalogFile), "--insecure-registry", e.preg.bridge)
	for _, want := range []string{"Result:     Verified", "Signer:     " + publisher.Name,
		"SBOM:       " + nbp.Name() + "@" + res.Attestations["nbp-fx"].SBOM, "Provenance: " + nbp.Name() + "@" + res.Attestations["nbp-fx"].Provenance} {
		if !strings.Contains(verify, want) {
			t.Errorf("plugin verify %s does not say %q", nbp, want)
		}
	}

	// Refused: the same image re-signed by another key only, under another
	// name; the CLI checks it as the operator would and creates nothing. A
	// signature by a key no one trusts is no signature: Unsigned.
	other, err := ocisign.NewKeySigner()
	must(t, err)
	copied := copyIndex(t, e, nbp, "plugins/nbp-fx-resigned")
	must(t, other.Sign(ctx, copied.loopback))
	code, outText := e.cli(ctx, "plugin", "install", "fx-resigned", "--image", copied.bridge.String(), "--insecure-registry", e.preg.bridge)
	t.Logf("openfief plugin install fx-resigned --image (re-signed by another key): exit %d\n%s", code, outText)
	if code != cli.ExitUnsigned {
		t.Errorf("installing the image re-signed by another key exited %d, want %d (unsigned)", code, cli.ExitUnsigned)
	}

	// Refused: a catalog file that names another publisher for nbp-fx,
	// even with the real publisher's key trusted as the owner's signer: the
	// file has no signature by a publisher the CLI knows.
	otherPub, err := other.PublicKeyPEM()
	must(t, err)
	forged, err := release.Catalog(plugins.Signer{Name: "not-the-publisher", Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: otherPub}}, res.Images)
	must(t, err)
	forgedFile := filepath.Join(e.work, "forged-catalog.json")
	must(t, os.WriteFile(forgedFile, forged, 0o644))
	ownerTrusts, err := key.SignersJSON("owner-trusts-the-release-key")
	must(t, err)
	signersFile := filepath.Join(e.work, "release-key-signers.json")
	must(t, os.WriteFile(signersFile, ownerTrusts, 0o644))
	code, outText = e.cli(ctx, "plugin", "install", "fx-forged", "--catalog", "nbp-fx", "--catalog-file", forgedFile, "--signers", signersFile, "--insecure-registry", e.preg.bridge)
	t.Logf("openfief plugin install fx-forged --catalog nbp-fx --catalog-file (another publisher): exit %d\n%s", code, outText)
	if code != cli.ExitUntrustedSigner || !strings.Contains(outText, "--catalog-file") {
		t.Errorf("installing by an unsigned catalog naming another publisher exited %d, want %d (the file refused)", code, cli.ExitUntrustedSigner)
	}
	kc := mustClient(t, e.c)
	for _, n := range []string{"fx-resigned", "fx-forged"} {
		if err := kc.Get(ctx, client.ObjectKey{Namespace: plugins.Namespace, Name: n}, &v1alpha1.Plugin{}); !apierrors.IsNotFound(err) {
			t.Errorf("plugin %s after its install was refused: %v, want NotFound", n, err)
		}
	}

	// Installed by its catalog name: no digest typed, Verified.
	const instance = "fx"
	relCLI("plugin", "install", instance, "--catalog", "nbp-fx", "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "approve", instance, "--yes")
	pod := runningPluginPod(t, e.cs, instance)
	if got := pod.Spec.Containers[0].Image; got != nbp.String() {
		t.Errorf("plugin %s runs %s, want the catalog's %s", instance, got, nbp)
	}
	if row := lineWith(openfief(t, e.kubeconfig, "plugin", "list"), instance); !strings.Contains(row, "Verified") {
		t.Errorf("plugin list's row %q: want Verified", row)
	}
	if status := openfief(t, e.kubeconfig, "plugin", "status", instance); !strings.Contains(status, "Verified") || !strings.Contains(status, publisher.Name) {
		t.Errorf("plugin status %s does not say Verified by %s", instance, publisher.Name)
	}
	verifiedEvent(t, e, instance, publisher.Name)
	dashboardSaysVerified(t, e, res.Catalog, instance, publisher.Name)

	openfief(t, e.kubeconfig, "plugin", "uninstall", instance, "--yes")
	restoredSyncsOn(t, e)
	code, outText = e.cli(ctx, "platform", "uninstall", "--yes", "--delete-data", "--timeout", "3m")
	installed = false
	t.Logf("openfief platform uninstall --delete-data: exit %d\n%s", code, outText)
	if code != cli.ExitOK {
		t.Errorf("openfief platform uninstall --delete-data exited %d", code)
	}
}

// releaseRepoPath is where the node's plugin registry holds the releases'
// images: <registry>/<releaseRepoPath>/openfief/<name>, the tree's and release
// A's alike, as one project's releases share their repositories (a kept
// isolation gate is one of the same repository, internal/operator/gatekeep.go).
const releaseRepoPath = "rel"

// treeRelease is the release of this tree the release and upgrade-release
// phases install: made once, by release.Make as `make release` makes one.
type treeRelease struct {
	res       *release.Result
	key       *ocisign.KeySigner
	publisher plugins.Signer
	out       string
}

// treeRelease makes the tree's release (releaseVersion, for this machine's
// platform only) into the node's plugin registry under rel/, signed by a
// publisher key of its own, the first time a phase asks for it.
func (e *platformEnv) treeRelease(t *testing.T) *treeRelease {
	t.Helper()
	if e.release != nil {
		return e.release
	}
	key, err := ocisign.NewKeySigner()
	must(t, err)
	pub, err := key.PublicKeyPEM()
	must(t, err)
	publisher := plugins.Signer{Name: "openfief-e2e-release", Kind: plugins.SignerPublisher, Identity: plugins.SignerIdentity{PublicKeyPEM: pub}}
	out := filepath.Join(e.work, "release-"+releaseVersion)
	start := time.Now()
	res, err := release.Make(context.Background(), release.Options{
		Root: e.root, Version: releaseVersion, Registry: e.preg.bridge + "/" + releaseRepoPath, Insecure: true,
		Signer: key, Publisher: publisher, BuilderID: images.LocalBuilderID,
		Command: "make release VERSION=" + releaseVersion, Out: out,
		Platforms: []v1.Platform{images.HostPlatform()}, AllowDirty: true, Progress: testLogWriter{t},
	})
	must(t, err)
	t.Logf("release %s made in %s", releaseVersion, time.Since(start).Round(100*time.Millisecond))
	e.release = &treeRelease{res: res, key: key, publisher: publisher, out: out}
	return e.release
}

// restoredSyncsOn installs again the plugin whose record the uninstall
// phase backed up, which the release's core restored: the core shows its
// rows before calling it, then syncs it on from its watermark, storing
// nothing twice (the NBP stand-in serves the same rates).
func restoredSyncsOn(t *testing.T, e *platformEnv) {
	t.Helper()
	if e.backup == "" {
		t.Error("the uninstall phase took no backup: nothing to restore")
		return
	}
	ctx := context.Background()
	instance := e.backupInstance
	// The owner's key as the platform's first install trusted it (the
	// stack's signers file followed that install's ConfigMap, which
	// --delete-data removed, so it is empty now).
	signers, err := e.signer.SignersJSON("local-owner")
	must(t, err)
	_, err = e.cs.CoreV1().ConfigMaps(plugins.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "openfief-trusted-signers", Namespace: plugins.Namespace},
		Data:       map[string]string{"signers.json": string(signers)},
	}, metav1.CreateOptions{})
	must(t, err)
	restored := time.Now()
	ref := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	openfief(t, e.kubeconfig, "plugin", "install", instance, "--image", ref.String(), "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "approve", instance, "--yes")
	st := syncedAfter(t, e, instance, restored, instance+" synced again by the release's core")
	if st.rows != e.backupRows || st.fxRates == 0 {
		t.Errorf("after the restore and a new sync %s holds %d rows (%s), want the %d it held at the backup", instance, st.rows, st.summary, e.backupRows)
	}
	t.Logf("restored and synced on: %s", st.summary)
	// Its rows were taken by the plugin installed under its name, not set
	// aside as an uninstalled plugin's data.
	if kept := openfief(t, e.kubeconfig, "plugin", "purge-data"); strings.Contains(kept, instance) {
		t.Errorf("the restored rows of %s were set aside as an uninstalled plugin's:\n%s", instance, kept)
	}
	openfief(t, e.kubeconfig, "plugin", "uninstall", instance, "--yes")
}

// backupRowCount reads the rows `openfief core backup` says it wrote.
func backupRowCount(t *testing.T, out string) int {
	t.Helper()
	m := regexp.MustCompile(`backup: (\d+) rows in`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("openfief core backup said no row count:\n%s", out)
	}
	n, err := strconv.Atoi(m[1])
	must(t, err)
	return n
}

// reclaimVolumes makes the node's pre-made volumes that a deleted claim
// released available again, empty, as a provisioner whose reclaim policy
// is Delete gives a new claim a new volume: the install that follows
// starts on an empty record.
func reclaimVolumes(t *testing.T, e *platformEnv) {
	t.Helper()
	ctx := context.Background()
	pvs, err := e.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, pv := range pvs.Items {
		if pv.Status.Phase != corev1.VolumeReleased {
			continue
		}
		dir := e.c.VolumeDir(pv.Name)
		entries, err := os.ReadDir(dir)
		must(t, err)
		for _, en := range entries {
			must(t, os.RemoveAll(filepath.Join(dir, en.Name())))
		}
		_, err = e.cs.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(`{"spec":{"claimRef":null}}`), metav1.PatchOptions{})
		must(t, err)
		t.Logf("volume %s reclaimed", pv.Name)
	}
}

// copiedImage is an index copied into another repository of the node's
// registry, by the name the test pushes to and the name pods use.
type copiedImage struct{ loopback, bridge plugins.ImageRef }

// copyIndex copies the image index src (a bridge name) into repo of the
// same registry, without its referrers: the same digest, none of its
// signatures.
func copyIndex(t *testing.T, e *platformEnv, src plugins.ImageRef, repo string) copiedImage {
	t.Helper()
	from, err := name.NewDigest(e.preg.loopback+"/"+src.Repository()+"@"+src.Digest(), name.Insecure)
	must(t, err)
	idx, err := remote.Index(from)
	must(t, err)
	to, err := name.NewDigest(e.preg.loopback+"/"+repo+"@"+src.Digest(), name.Insecure)
	must(t, err)
	must(t, remote.WriteIndex(to, idx))
	lb, err := plugins.ParseImageRef(to.String())
	must(t, err)
	br, err := plugins.ParseImageRef(e.preg.bridge + "/" + repo + "@" + src.Digest())
	must(t, err)
	return copiedImage{loopback: lb, bridge: br}
}

// verifiedEvent waits for the operator's ImageVerified Event on the
// Plugin, which says Verified and names the publisher.
func verifiedEvent(t *testing.T, e *platformEnv, plugin, publisher string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, "plugin "+plugin+": an ImageVerified Event naming "+publisher, func() (bool, string) {
		evs, err := e.cs.CoreV1().Events(plugins.Namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Plugin,involvedObject.name=" + plugin,
		})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			seen = append(seen, ev.Reason+": "+ev.Message)
			if ev.Reason == operator.EventImageVerified && strings.HasPrefix(ev.Message, "Verified") && strings.Contains(ev.Message, publisher) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %q", seen)
	})
}

// dashboardSaysVerified serves the owner's dashboard with the release's
// catalog and waits until the plugin's page says Verified and names the
// publisher.
func dashboardSaysVerified(t *testing.T, e *platformEnv, rawCatalog []byte, plugin, publisher string) {
	t.Helper()
	cat, err := plugins.ParseCatalog(rawCatalog)
	must(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	must(t, err)
	srv, err := dashboard.New(dashboard.Options{Config: cfg, Namespace: plugins.Namespace, Catalog: cat}, 0)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dashboard: %v", err)
		}
	}()
	hc := &http.Client{Timeout: 10 * time.Second}
	testutil.Eventually(t, time.Minute, "the dashboard's page of "+plugin+" says Verified by "+publisher, func() (bool, string) {
		resp, err := hc.Get(srv.URL() + "plugins/" + plugin)
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return false, err.Error()
		}
		page := string(body)
		if resp.StatusCode != http.StatusOK {
			return false, resp.Status
		}
		return strings.Contains(page, "✔ Verified") && strings.Contains(page, publisher), "the page does not say Verified by the publisher yet"
	})
}

// lineWith is the first line of text that holds s, or "".
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
