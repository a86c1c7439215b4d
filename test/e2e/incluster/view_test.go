//go:build cluster

package incluster

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/views/webdavcsv"
)

// viewSecret is webdav-csv's Secret slot, which the owner fills with the
// WebDAV server's username and password.
const viewSecret = "webdav-credentials"

// standInRates are the rates the NBP stand-in (devstack.FakeNBP) answers
// every query with, by currency: nbp-fx stores them against PLN.
var standInRates = map[string]string{"USD": "3.6589", "EUR": "4.2301"}

// fxFile is the path of a monthly FX-rate file under the view's folder.
var fxFile = regexp.MustCompile(`^(\d{4})/(\d{4})-(\d{2})-fx-rates\.csv$`)

// testView runs the view webdav-csv, signed by the owner, as a pod of the
// real node, exporting the FX rates nbp-fx stored to the WebDAV stand-in
// (devstack.FakeDAV, at a StandIn address the cluster DNS gives
// dav.openfief.test): the owner creates the webdav-credentials Secret,
// installs the view with the stand-in's folder as its url, and approves the
// folder's host as a host of their choosing. The monthly FX-rate files
// then hold exactly the rates nbp-fx stored, `plugin status` reports a
// successful export, and an egress proxy pod logged the view's tunnel to
// dav.openfief.test:443. The stand-in is reachable only through the proxy:
// the probe plays a plugin under webdav-csv's manifest and the same grant
// (the same NetworkPolicy and allow-list, which the phase compares with the
// view's), and from inside it a direct connection to the stand-in's address
// is refused while the proxy opens a tunnel to dav.openfief.test:443 and
// to no other host. The phase uninstalls everything it installed, with
// the data the core kept and the Secret.
func testView(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	const (
		source = "view-fx"
		view   = "view"
		probe  = "probe-view"
	)
	if e.dav == nil {
		t.Fatal("the stack started no WebDAV stand-in")
	}
	uninstallOnFailure(t, e, probe, view, source)
	t.Cleanup(func() { deleteSecret(t, e, viewSecret) })

	// The rates the view is to export: nbp-fx's, stored by the core.
	fx := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	openfief(t, e.kubeconfig, "plugin", "install", source, "--image", fx.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "approve", source, "--yes")
	openfief(t, e.kubeconfig, "plugin", "wait", source, "--for", "Running", "--timeout", "3m")
	stored := waitCoreStatus(t, e, source, 2*time.Minute, "nbp-fx's FX rates stored", func(s coreStatus) bool {
		return s.succeeded && s.fxRates > 0
	})
	t.Logf("the core stored %s's rates: %s", source, stored.summary)

	// The owner's Secret, as kubectl would create it, then the view.
	_, err := e.cs.CoreV1().Secrets(plugins.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: viewSecret, Namespace: plugins.Namespace},
		Data:       map[string][]byte{"username": []byte(e.dav.Username), "password": []byte(e.dav.Password)},
	}, metav1.CreateOptions{})
	must(t, err)
	config := writeViewConfig(t, e.dav.FolderURL())
	m := pluginManifest(t, e.root, "webdav-csv")
	ref := e.preg.publish(t, "plugins/webdav-csv", m, map[string][]byte{
		"plugin":                            buildStatic(t, e.root, "./plugins/webdav-csv"),
		"etc/ssl/certs/ca-certificates.crt": e.dav.CAPEM(),
	}, e.signer)
	davBefore := e.dav.Requests.Load()
	installView(t, e, view, ref, config)
	pod := runningPluginPod(t, e.cs, view)
	if id := pod.Status.ContainerStatuses[0].ContainerID; !strings.HasPrefix(id, "containerd://") {
		t.Errorf("the view's pod %s runs no container of the node: %q", pod.Name, id)
	}
	if env := containerEnv(pod, "HTTPS_PROXY"); env == "" {
		t.Errorf("the view's pod %s has no HTTPS_PROXY, yet it was granted %s", pod.Name, devstack.FakeDAVHost)
	}
	t.Logf("view pod %s (%s) Running as a container", pod.Name, pod.Status.PodIP)

	// The view's export: the FX-rate files hold every rate nbp-fx stored,
	// and nothing but FX-rate files arrive (the record holds nothing else).
	var rows []fxRow
	testutil.Eventually(t, 2*time.Minute, "the stand-in holding "+source+"'s rates in monthly FX-rate files", func() (bool, string) {
		s, _ := readCoreStatus(ctx, e, source)
		var msg string
		rows, msg = readFXFiles(e.dav)
		if msg != "" {
			return false, msg
		}
		mine := 0
		for _, r := range rows {
			if r.source == source {
				mine++
			}
		}
		return s.fxRates > 0 && mine == s.fxRates, fmt.Sprintf("%d rows of %s in the files, the core stored %d", mine, source, s.fxRates)
	})
	checkFXRows(t, rows)
	st := waitCoreStatus(t, e, view, time.Minute, "a successful export reported", func(s coreStatus) bool {
		return s.view && s.succeeded
	})
	t.Logf("openfief plugin status %s: %s; the stand-in answered %d requests", view, st.summary, e.dav.Requests.Load()-davBefore)
	if e.dav.Requests.Load() == davBefore {
		t.Error("the WebDAV stand-in received no request, yet it holds the files")
	}

	// The view's network position, held by the probe: same manifest, same
	// grant, so the same NetworkPolicy and allow-list.
	probeRef := e.preg.publish(t, "plugins/probe-view", m, map[string][]byte{"plugin": e.probeBinary(t)}, e.signer)
	installView(t, e, probe, probeRef, config)
	p := runningPluginPod(t, e.cs, probe)
	samePosition(t, e, view, probe)
	direct := e.dav.Addr()
	if host, _, err := net.SplitHostPort(direct); err != nil || net.ParseIP(host) == nil {
		t.Fatalf("the stand-in's address %q is not an IP address and port", direct)
	}
	// Measured until each cell gives what it must (a new pod's policy
	// reaches the node's firewall within seconds); a cell that did is not
	// measured again.
	cells := []viewCell{
		{"connect " + direct, blocked},
		{"proxy " + devstack.FakeDAVHost + ":443", is("status 200")},
		{"proxy api.nbp.pl:443", is("status 403")},
	}
	got := map[string]string{}
	testutil.Eventually(t, 2*time.Minute, "the view's position measured from the probe", func() (bool, string) {
		done := true
		for _, c := range cells {
			if !c.ok(got[c.args]) {
				got[c.args] = strings.TrimSpace(execIn(t, e.c, e.cs, p, append([]string{"/plugin"}, strings.Fields(c.args)...)...))
				done = done && c.ok(got[c.args])
			}
		}
		return done, fmt.Sprint(got)
	})
	for _, c := range cells {
		t.Logf("from the view's position: probe %s: %s", c.args, got[c.args])
	}

	// Remove it all. The proxy logs the view's tunnel once it closes, which
	// its pod's end does.
	openfief(t, e.kubeconfig, "plugin", "uninstall", probe, "--yes", "--purge", "--purge-data", "--wait", "60s")
	openfief(t, e.kubeconfig, "plugin", "uninstall", view, "--yes", "--purge", "--purge-data", "--wait", "60s")
	// The proxy's pod reached the address the probe could not: the
	// refusal is the view's policy, not an address pods cannot reach.
	line := checkProxyDecision(t, e, view, devstack.FakeDAVHost+":443")
	var tunnel struct{ Upstream string }
	if err := json.Unmarshal([]byte(line), &tunnel); err != nil || tunnel.Upstream != direct {
		t.Errorf("the proxy's tunnel for the view went to %q (%v), want the stand-in's address %s", tunnel.Upstream, err, direct)
	}
	openfief(t, e.kubeconfig, "plugin", "uninstall", source, "--yes", "--purge", "--purge-data", "--wait", "60s")
	if _, err := e.cs.CoreV1().Secrets(plugins.Namespace).Get(ctx, viewSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after uninstall --purge the Secret %s: %v, want it deleted", viewSecret, err)
	}
}

// installView installs a plugin under webdav-csv's manifest with config and
// approves it as the owner would: first the folder's host, as a host of
// their choosing, then everything else pending, so the pod starts with the
// host on its allow-list.
func installView(t *testing.T, e *platformEnv, name string, ref plugins.ImageRef, config string) {
	t.Helper()
	openfief(t, e.kubeconfig, "plugin", "install", name, "--image", ref.String(), "--config", config, "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
	openfief(t, e.kubeconfig, "plugin", "wait", name, "--for", "NoGrant", "--timeout", "60s")
	openfief(t, e.kubeconfig, "plugin", "approve", name, "--host", devstack.FakeDAVHost, "--yes")
	// The operator writes the new grant's status meanwhile; approve writes
	// again over a status-only change (TestWriteGrantWhileStatusMoves).
	openfief(t, e.kubeconfig, "plugin", "approve", name, "--yes")
	openfief(t, e.kubeconfig, "plugin", "wait", name, "--for", "Running", "--timeout", "3m")
}

// writeViewConfig writes webdav-csv's config naming folder, for --config.
func writeViewConfig(t *testing.T, folder string) string {
	t.Helper()
	raw, err := json.Marshal(map[string]string{"url": folder})
	must(t, err)
	file := filepath.Join(t.TempDir(), "webdav-csv.json")
	must(t, os.WriteFile(file, raw, 0o600))
	return file
}

// fxRow is one row of a monthly FX-rate file.
type fxRow struct {
	file, source, date, base, quote, rate string
}

// readFXFiles reads every file in the stand-in's folder as webdav-csv's
// monthly FX-rate files; msg says why not when one is something else.
func readFXFiles(dav *devstack.FakeDAV) (rows []fxRow, msg string) {
	files, err := dav.Files()
	if err != nil {
		return nil, err.Error()
	}
	if len(files) == 0 {
		return nil, "no file yet"
	}
	header := webdavcsv.Header(webdavcsv.KindFXRates)
	col := func(name string) int { return slices.Index(header, name) }
	for _, f := range files {
		if !fxFile.MatchString(f) {
			return nil, fmt.Sprintf("%s is not a monthly FX-rate file (files: %v)", f, files)
		}
		raw, err := dav.ReadFile(f)
		if err != nil {
			return nil, err.Error()
		}
		records, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
		if err != nil {
			return nil, fmt.Sprintf("%s: %v", f, err)
		}
		if len(records) == 0 || !slices.Equal(records[0], header) {
			return nil, fmt.Sprintf("%s does not start with the header %v", f, header)
		}
		for _, r := range records[1:] {
			rows = append(rows, fxRow{file: f, source: r[col("source")], date: r[col("date")],
				base: r[col("base_currency")], quote: r[col("quote_currency")], rate: r[col("rate")]})
		}
	}
	return rows, ""
}

// checkFXRows checks that every row is a rate the NBP stand-in gave, in the
// file of its date's month, and that no entry is there twice.
func checkFXRows(t *testing.T, rows []fxRow) {
	t.Helper()
	seen := map[string]bool{}
	bySource := map[string]int{}
	for _, r := range rows {
		bySource[r.source]++
		m := fxFile.FindStringSubmatch(r.file)
		if _, err := time.Parse(time.DateOnly, r.date); err != nil || r.date[:7] != m[2]+"-"+m[3] || m[1] != m[2] {
			t.Errorf("%s holds a rate dated %q", r.file, r.date)
		}
		if want, ok := standInRates[r.base]; !ok || r.quote != "PLN" || r.rate != want {
			t.Errorf("%s holds %s/%s %s, which the NBP stand-in never gave", r.file, r.base, r.quote, r.rate)
		}
		key := r.source + " " + r.date + " " + r.base
		if seen[key] {
			t.Errorf("%s holds %s's %s rate of %s twice", r.file, r.source, r.base, r.date)
		}
		seen[key] = true
	}
	// The core exports the rates of removed instances too (an earlier
	// phase's nbp-fx), under their keys.
	t.Logf("the stand-in's folder holds %d FX rates, by source: %v", len(rows), bySource)
}

// samePosition checks that two plugins have the same NetworkPolicy rules
// and the same egress allow-list, so that what one meets on the network
// the other does too.
func samePosition(t *testing.T, e *platformEnv, a, b string) {
	t.Helper()
	ctx := context.Background()
	pols := e.cs.NetworkingV1().NetworkPolicies(plugins.Namespace)
	pa, err := pols.Get(ctx, plugins.ServiceAccountName(a), metav1.GetOptions{})
	must(t, err)
	pb, err := pols.Get(ctx, plugins.ServiceAccountName(b), metav1.GetOptions{})
	must(t, err)
	if d := cmp.Diff(pa.Spec.Ingress, pb.Spec.Ingress); d != "" {
		t.Errorf("the NetworkPolicies of %s and %s differ in ingress (-%s +%s):\n%s", a, b, a, b, d)
	}
	if d := cmp.Diff(pa.Spec.Egress, pb.Spec.Egress); d != "" {
		t.Errorf("the NetworkPolicies of %s and %s differ in egress (-%s +%s):\n%s", a, b, a, b, d)
	}
	testutil.Eventually(t, time.Minute, "the same allow-list for "+a+" and "+b, func() (bool, string) {
		cm, err := e.cs.CoreV1().ConfigMaps(plugins.Namespace).Get(ctx, plugins.AllowListConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		want := devstack.FakeDAVHost + ":443\n"
		return cm.Data[a] == want && cm.Data[b] == want, fmt.Sprintf("%s: %q, %s: %q, want %q", a, cm.Data[a], b, cm.Data[b], want)
	})
}

// viewCell is one measurement from the probe at the view's position: the
// probe's arguments and what its answer must be.
type viewCell struct {
	args string
	ok   func(answer string) bool
}

// blocked accepts a connection the node's firewall refused, or dropped
// (where its ICMP answers are rate-limited), as probeVerdict reads them.
func blocked(answer string) bool {
	v := probeVerdict(answer)
	return v == "refused" || v == "timeout"
}

// is accepts exactly want.
func is(want string) func(string) bool { return func(s string) bool { return s == want } }

// deleteSecret deletes the Secret name of the platform's namespace, if it
// is still there.
func deleteSecret(t *testing.T, e *platformEnv, name string) {
	t.Helper()
	err := e.cs.CoreV1().Secrets(plugins.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Secret %s: %v", name, err)
	}
}
