//go:build cluster

package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
	"github.com/arkadiuss/openfief/internal/dashboard"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// hostileError is a last error a connector could make the core record:
// markup a careless page would run, and a terminal escape.
const hostileError = `bank said <script>window.__xss=1</script><img src=x onerror="window.__xss=2"> \x1b[2J`

// TestDashboardShowsTheCore runs the dashboard with the CLI's reader of
// openfief-core (the owner's token minted with the kubeconfig, through the
// API server's real service proxy, as `openfief dashboard` does) against the
// real core, in process on the minimal control plane with a real SQLite
// store: a running connector's page shows its last and next sync, error and
// rows; a hostile last error is text; a plugin uninstalled while the page is
// open appears in Removed data on the event stream, with its rows, its own
// page and the purge command; a stopped core turns into the line "the core
// did not answer", never a crash or the token.
func TestDashboardShowsTheCore(t *testing.T) {
	dc := devcluster.Shared(t, devcluster.Options{CRDDirectoryPaths: []string{testutil.CRDDir()}})
	cfg := dc.Config
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// A namespace of its own: the core's Service here is the test's.
	const ns = "dash-core"
	testutil.EnsureNamespaces(t, cs, ns)
	testutil.EnsureServiceAccount(t, cs, ns, ownerapi.ServiceAccount)
	testutil.EnsureServiceAccount(t, cs, ns, core.DefaultServiceAccount)
	ctx := context.Background()

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "core.db"))
	if err != nil {
		t.Fatal(err)
	}
	// The API server proxies only to an address that is not loopback.
	hostIP := testutil.HostAddress(t)
	c, err := core.Start(ctx, cfg, core.Options{
		Namespace: ns, ServiceAccount: core.DefaultServiceAccount,
		Store: st, PluginAddr: "127.0.0.1:0", OwnerAddr: net.JoinHostPort(hostIP, "0"),
		Scheduler: core.SchedulerOptions{FirstSyncDelay: -1, DefaultInterval: time.Hour},
		Log:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.Stop()
		}
	})
	_, port, _ := net.SplitHostPort(c.OwnerAddr())
	testutil.ServeServiceAt(t, cs, ns, ownerapi.ServiceName, ownerapi.ServicePort, core.DefaultServiceAccount, hostIP, port)

	// What the core stored and recorded: a connector that synced (its
	// next sync recorded, which the scheduler keeps), one whose last sync
	// failed with a hostile error, and one to be uninstalled.
	now := time.Now().UTC().Truncate(time.Second)
	next := now.Add(30 * time.Minute)
	install := func(name string, rows int, rec store.SyncRecord) *v1alpha1.Plugin {
		t.Helper()
		p := testutil.MakePlugin(name, testutil.Image(name)).Capabilities("connector").Obj()
		p.Namespace = ns
		if err := kc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Claim(ctx, name, string(p.UID), now); err != nil {
			t.Fatal(err)
		}
		if rows > 0 {
			if _, err := st.Import(ctx, name, store.KindSync, storetest.Sync("b1", 0, rows, "w1")); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.RecordSync(ctx, name, rec); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fx := install("dc-fx", 4, store.SyncRecord{At: now.Add(-2 * time.Minute), OK: true, Next: next})
	install("dc-hostile", 0, store.SyncRecord{At: now.Add(-time.Minute), Error: hostileError})
	old := install("dc-old", 3, store.SyncRecord{At: now.Add(-time.Hour), OK: true})
	setRunning(t, kc, fx)

	env := cli.NewEnv(cli.Streams{})
	env.Kubeconfig, env.Namespace = dc.KubeconfigPath, ns
	read, err := env.DashboardCore("")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := dashboard.New(dashboard.Options{
		Config: cfg, Namespace: ns, ApproveCommand: env.ApproveCommand,
		CoreStatus: read, CoreInterval: 200 * time.Millisecond,
		PurgeCommand: func(key string) string { return env.PurgeDataCommand(key, "") },
		Now:          func() time.Time { return now.Add(5 * time.Minute) },
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("dashboard: %v", err)
		}
	})
	base := srv.URL()
	waitServing(t, base)

	// The running connector's page: what `plugin status` says of it.
	page := waitPage(t, base+"plugins/dc-fx", "Next sync")
	for _, want := range []string{
		"yes, as a connector on a schedule",
		now.Add(-2*time.Minute).Format(time.RFC3339) + " (7m ago), succeeded",
		"<dt>Next sync</dt><dd>" + next.Format(time.RFC3339) + "</dd>",
		"<dd>17 (batches 1, transactions 4, postings 8, balances 1, prices 1, FX rates 1, index readings 1, problems 1)</dd>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("dc-fx's page lacks %q:\n%s", want, page)
		}
	}
	// A hostile last error is text: escaped by the templates, its
	// terminal escape shown as one.
	page = waitPage(t, base+"plugins/dc-hostile", "Last error")
	if !strings.Contains(page, `bank said &lt;script&gt;window.__xss=1&lt;/script&gt;&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt; \x1b[2J`) {
		t.Errorf("dc-hostile's page does not show its last error as escaped text:\n%s", page)
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Errorf("dc-hostile's page has %d script elements, want only its own", n)
	}

	// Uninstalled while the table is open: the core marks its data removed
	// and the event stream brings it, with the purge command.
	events := openEvents(t, base+"events")
	if err := kc.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	part := events.waitFor(t, `data-key="dc-old~`)
	key := "dc-old~" + string(old.UID)[:8]
	for _, want := range []string{
		`<a href="./removed/` + key + `">` + key + `</a>`,
		"<td>dc-old</td>",
		"<td>14</td>", // 3 transactions, 6 postings, a balance, a price, an FX rate, an index reading, a problem
		"<code>openfief plugin purge-data " + key + " --kubeconfig " + dc.KubeconfigPath + " -n " + ns + "</code>",
	} {
		if !strings.Contains(part, want) {
			t.Errorf("the table's removed data lacks %q:\n%s", want, part)
		}
	}
	if strings.Contains(part, `id="purge"`) || strings.Contains(part, "purge-data "+key+"\" method") {
		t.Error("the table offers to purge: deleting data is the CLI's")
	}
	page = waitPage(t, base+"removed/"+key, "Rows kept")
	for _, want := range []string{"<dt>Plugin</dt><dd>dc-old</dd>", "<dt>Transactions</dt><dd>3</dd>", `<code id="purge-command">openfief plugin purge-data ` + key} {
		if !strings.Contains(page, want) {
			t.Errorf("%s's page lacks %q:\n%s", key, want, page)
		}
	}

	t.Run("browser", func(t *testing.T) { checkCoreInBrowser(t, kc, base, key, dc.KubeconfigPath) })

	// The core stops: the line, on the stream and on the pages.
	plugin := openEvents(t, base+"events?plugin=dc-fx")
	plugin.waitFor(t, "Next sync")
	c.Stop()
	stopped = true
	part = plugin.waitFor(t, "the core did not answer: ")
	if strings.Contains(part, "Next sync") {
		t.Errorf("the page still shows the core's data after it stopped answering:\n%s", part)
	}
	page = waitPage(t, base, "the core did not answer: ")
	if strings.Contains(page, `data-key="`) {
		t.Error("the table still lists removed data after the core stopped answering")
	}
	for what, text := range map[string]string{"the plugin's event": part, "the table": page} {
		// The owner's token is a JWT; no part of one is ever shown.
		if strings.Contains(text, "eyJ") {
			t.Errorf("%s holds a token: %s", what, text)
		}
	}
}

// setRunning writes the status the operator writes for a running
// connector, so the core schedules it.
func setRunning(t *testing.T, kc client.Client, p *v1alpha1.Plugin) {
	t.Helper()
	var cur v1alpha1.Plugin
	if err := kc.Get(context.Background(), client.ObjectKeyFromObject(p), &cur); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonRunning, Message: "runs", ObservedGeneration: cur.Generation})
	cur.Status.ObservedGeneration = cur.Generation
	cur.Status.Effective = &v1alpha1.EffectivePermissions{Capabilities: []v1alpha1.Capability{v1alpha1.Capability(plugins.CapabilityConnector)}}
	if err := kc.Status().Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
}

// waitPage gets url until its page holds want, and returns it.
func waitPage(t *testing.T, url, want string) string {
	t.Helper()
	var page string
	testutil.Eventually(t, 30*time.Second, url+" shows "+want, func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
		return strings.Contains(page, want), resp.Status + "\n" + page
	})
	return page
}

// eventStream is an open /events stream: each event's live part, in order.
type eventStream struct {
	parts chan string
}

// openEvents opens the event stream at url and reads it until the test
// ends.
func openEvents(t *testing.T, url string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	s := &eventStream{parts: make(chan string, 256)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.parts)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var u struct {
				HTML string `json:"html"`
			}
			if json.Unmarshal([]byte(data), &u) != nil {
				continue
			}
			select {
			case s.parts <- u.HTML:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return s
}

// waitFor returns the first event from now on whose live part holds want.
func (s *eventStream) waitFor(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	last := ""
	for {
		select {
		case part, ok := <-s.parts:
			if !ok {
				t.Fatalf("the event stream ended before an event held %q; the last:\n%s", want, last)
			}
			if strings.Contains(part, want) {
				return part
			}
			last = part
		case <-timeout:
			t.Fatalf("no event held %q within 60s; the last:\n%s", want, last)
		}
	}
}

// checkCoreInBrowser reads the removed data in headless Chromium, at a
// phone's width, for what only a browser shows: the pages fit the screen;
// the keyboard focus stays on a key's Copy button (its id holds a '~')
// while the table is redrawn; the key's page follows its own event stream;
// and the purge command it shows, run as shown, purges the data and the
// open page says so without a reload.
func checkCoreInBrowser(t *testing.T, kc client.Client, base, key, kubeconfig string) {
	b := newBrowser(t, chromiumPath(t))
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	fits := func(what string) {
		t.Helper()
		if got := b.eval(`String(document.documentElement.scrollWidth <= document.documentElement.clientWidth) + " " + document.documentElement.scrollWidth + "/" + document.documentElement.clientWidth`); !strings.HasPrefix(got, "true") {
			t.Errorf("%s overflows a 390 px screen sideways (scrollWidth/clientWidth %s)", what, strings.TrimPrefix(got, "false "))
		}
	}
	b.do(chromedp.Navigate(base))
	b.waitFor(`document.body.dataset.updates >= 1 && document.querySelector("tr[data-key]") !== null`)
	fits("the table page with removed data")

	copyID := "copy-purge-" + key
	b.eval(`document.getElementById(` + jsString(copyID) + `).focus(), "ok"`)
	p := testutil.MakePlugin("dc-new", testutil.Image("dc-new")).Capabilities("connector").Obj()
	p.Namespace = "dash-core"
	if err := kc.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	b.waitFor(`document.querySelector('tr[data-name="dc-new"]') !== null`)
	if got := b.eval(`document.activeElement.id`); got != copyID {
		t.Errorf("after the table was redrawn the focus is on %q, want %q", got, copyID)
	}

	b.do(chromedp.Navigate(base + "removed/" + key))
	b.waitFor(`document.body.dataset.updates >= 1`)
	fits("a key's page")
	shown := b.eval(`document.getElementById("purge-command").textContent`)
	if strings.ContainsAny(shown, `'"\`) {
		t.Fatalf("the command %q needs a shell to split it; this test splits on spaces", shown)
	}
	args := strings.Fields(shown)
	if len(args) < 3 || args[0] != "openfief" {
		t.Fatalf("the page shows %q, not an openfief command", shown)
	}
	var out strings.Builder
	streams := cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	if code := cli.Main(context.Background(), append(args[1:], "--yes"), streams); code != cli.ExitOK {
		t.Fatalf("%s --yes exited %d:\n%s", shown, code, out.String())
	}
	if !strings.Contains(shown, "--kubeconfig "+kubeconfig) {
		t.Errorf("the command %q does not name the dashboard's kubeconfig", shown)
	}
	b.waitFor(`document.getElementById("removed-detail").innerText.includes("keeps no data under this key")`)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
