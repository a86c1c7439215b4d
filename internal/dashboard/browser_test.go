//go:build cluster

package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/dashboard"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// updateScreenshot makes TestDashboardInBrowser write docs/dashboard.png.
var updateScreenshot = flag.Bool("update-screenshot", false, "write the browser test's screenshot to docs/dashboard.png")

// Manifests of the test plugins: each differs, so each image has its own
// digest.
var (
	verifiedManifest = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}}
	signedManifest   = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.ecb.europa.eu"}}
	upgradeV1        = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}, DataTiers: []string{"rates"}}
	upgradeV2        = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl", "static.nbp.pl"}, DataTiers: []string{"rates"}}
	noGrantManifest  = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityView}}
	unsignedManifest = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityView}, DataTiers: []string{"holdings"}}
	// hostileManifest's config schema carries markup a careless page would
	// run: a script and an image whose error handler sets window.__xss.
	hostileSchema   = `{"type":"object","title":"<img src=x onerror=\"window.__xss=2\">","description":"<script>window.__xss=1</script>"}`
	hostileManifest = plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"hostile.example.com"}, ConfigSchema: json.RawMessage(hostileSchema)}
)

// TestDashboardInBrowser runs `openfief dashboard`'s server against a real
// platform and reads it in headless Chromium: what each row says for a
// Verified, an only-signed, an upgrade waiting for approval and an
// ungranted plugin; a grant changed with the CLI updates the open page
// without a reload; a hostile manifest shows as text and runs nothing; the
// CSP is sent and enforced; a request without the token is refused; and the
// page fits a phone's width.
func TestDashboardInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	began := time.Now()
	p, verified := newPlatform(t, verifiedManifest)
	signed := p.signed(t, "plugins/fx-signed", signedManifest)
	v1 := p.signed(t, "plugins/fx-upgrade", upgradeV1)
	v2 := p.signed(t, "plugins/fx-upgrade", upgradeV2)
	noGrant := p.signed(t, "plugins/fx-nogrant", noGrantManifest)
	unsigned := p.reg.PushImage(t, "plugins/fx-unsigned", cosigntest.ManifestLabel(t, unsignedManifest))
	hostile := p.signed(t, "plugins/hostile", hostileManifest)
	p.startOperator(t)

	kubeconfig := p.cluster.KubeconfigPath
	openfief := func(args ...string) {
		t.Helper()
		var out bytes.Buffer
		full := append([]string{"--kubeconfig", kubeconfig}, args...)
		if code := cli.Main(context.Background(), full, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}); code != cli.ExitOK {
			t.Fatalf("openfief %s exited %d:\n%s", strings.Join(args, " "), code, out.String())
		}
	}
	p.install(t, "fx-verified", verified, verifiedManifest)
	p.install(t, "fx-signed", signed, signedManifest)
	p.install(t, "fx-upgrade", v1, upgradeV1)
	p.install(t, "fx-nogrant", noGrant, noGrantManifest)
	p.install(t, "hostile", hostile, hostileManifest)
	p.install(t, "fx-unsigned", unsigned, unsignedManifest)
	for _, name := range []string{"fx-verified", "fx-signed", "fx-upgrade"} {
		openfief("plugin", "approve", name, "--yes")
	}
	p.waitReady(t, "fx-upgrade", "Running")
	p.upgrade(t, "fx-upgrade", v2, upgradeV2)
	p.waitReady(t, "fx-verified", "Running")
	p.waitReady(t, "fx-signed", "Running")
	p.waitReady(t, "fx-upgrade", "RunningPreviousVersion")
	p.waitReady(t, "fx-nogrant", "NoGrant")
	p.waitReady(t, "hostile", "NoGrant")
	p.waitReady(t, "fx-unsigned", "NoGrant")
	t.Logf("platform up, six plugins reconciled in %s", time.Since(began).Round(time.Millisecond))

	env := cli.NewEnv(cli.Streams{})
	env.Kubeconfig = kubeconfig
	srv, err := dashboard.New(dashboard.Options{
		Config: p.cluster.Config, Namespace: plugins.Namespace, Catalog: p.catalog,
		ApproveCommand: env.ApproveCommand, StatusCommand: env.PluginStatusCommand, Approve: env.ApprovePending,
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("dashboard: %v", err)
		}
	})
	// The URL holds the token as the first path segment; every page is
	// under it.
	base := srv.URL()
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	origin := u.Scheme + "://" + u.Host
	waitServing(t, base)

	t.Run("http", func(t *testing.T) { checkHTTP(t, base, origin) })

	browserStart := time.Now()
	b := newBrowser(t, chromium)
	b.do(chromedp.EmulateViewport(1280, 900))
	// The command opens the browser on a launcher file, so the token is in
	// no command line; from it, the browser goes to the URL with the token.
	launcher, err := srv.Launcher(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Navigate("file://" + launcher))
	b.waitFor(`document.body.dataset.updates >= 1`)
	if loc := b.eval(`location.href`); loc != base {
		t.Errorf("after the first visit the address is %q, want %q", loc, base)
	}

	rows := b.rows()
	digest := func(ref plugins.ImageRef) string { return "sha256:" + strings.TrimPrefix(ref.Digest(), "sha256:")[:12] }
	for name, want := range map[string][]string{
		"fx-verified": {"Running", "✔ Verified", "in the catalog, signed by its publisher (Verified)", publisherName, "Catalog publisher: public key SHA256:", digest(verified), "Nothing pending"},
		"fx-signed":   {"Running", "◐ Signed, not verified", "(SignedByTrustedSigner)", ownerName, "Owner's signer: public key SHA256:", digest(signed), "Nothing pending"},
		"fx-upgrade":  {"RunningPreviousVersion", "runs", "◐ Signed, not verified", ownerName, digest(v2), "⚠ Approval pending (1)", "egress static.nbp.pl:443"},
		"fx-nogrant":  {"NoGrant", "nothing runs", "◐ Signed, not verified", ownerName, digest(noGrant), "⚠ Approval pending (1)", "capability view"},
		"hostile":     {"NoGrant", "◐ Signed, not verified", "⚠ Approval pending (2)", "egress hostile.example.com:443"},
		"fx-unsigned": {"NoGrant", "nothing runs", "✖ Refused: unsigned", "(Unsigned)", "—", "no trusted signer", digest(unsigned)},
	} {
		got, ok := rows[name]
		if !ok {
			t.Errorf("no row for %s; rows: %v", name, rows)
			continue
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("row %s lacks %q:\n%s", name, w, got)
			}
		}
		if name == "fx-unsigned" && strings.Contains(got, "Signed") {
			t.Errorf("row %s, unsigned, reads as signed:\n%s", name, got)
		}
		if name != "fx-verified" && strings.Contains(got, "✔ Verified") {
			t.Errorf("row %s, not in the catalog, reads as Verified:\n%s", name, got)
		}
	}
	if len(rows) != 6 {
		t.Errorf("%d rows, want 6: %v", len(rows), rows)
	}
	if order := b.eval(`Array.from(document.querySelectorAll("#plugins tbody tr")).map(tr => tr.dataset.name).join(",")`); order != "fx-nogrant,fx-signed,fx-unsigned,fx-upgrade,fx-verified,hostile" {
		t.Errorf("rows in the order %s, want sorted by name", order)
	}
	if title := b.eval(`document.querySelector('tr[data-name="fx-verified"] td[title]:nth-of-type(4)').title`); title != verified.String() {
		t.Errorf("the digest cell's title is %q, want the full reference %s", title, verified.String())
	}
	if got := b.eval(`Array.from(document.querySelectorAll("#plugins thead th")).map(th => th.scope).join(",") + "|" + document.querySelector("#plugins caption").textContent`); !strings.HasPrefix(got, "col,col,col,col,col,col,col|Plugins in namespace") {
		t.Errorf("the table's header cells and caption: %s", got)
	}

	// What needs attention, at the top: the refused image first, then the
	// three plugins waiting for approval, each with its command.
	if got := b.eval(`Array.from(document.querySelectorAll("#attention li")).map(li => li.dataset.kind + " " + li.dataset.plugin).join(",")`); got != "ImageRefused fx-unsigned,ApprovalPending fx-nogrant,ApprovalPending fx-upgrade,ApprovalPending hostile" {
		t.Errorf("the attention list holds %s", got)
	}
	if got := b.eval(`document.querySelector('#attention li[data-plugin="fx-upgrade"] button.copy').dataset.copy`); got != "openfief plugin approve fx-upgrade --kubeconfig "+kubeconfig {
		t.Errorf("fx-upgrade's attention item copies %q", got)
	}
	if got := b.eval(`document.querySelector('#attention li[data-plugin="fx-unsigned"] button.copy').dataset.copy`); got != "openfief plugin status fx-unsigned --kubeconfig "+kubeconfig {
		t.Errorf("fx-unsigned's attention item copies %q", got)
	}
	if top := b.eval(`String(document.getElementById("attention").getBoundingClientRect().top < document.getElementById("plugins").getBoundingClientRect().top)`); top != "true" {
		t.Error("the attention list is not above the plugins' table")
	}

	// The screenshot for docs/dashboard.png: the four kinds of row, with
	// the upgrade still waiting for approval.
	t.Run("screenshot", func(t *testing.T) {
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "dashboard.png")
		if *updateScreenshot {
			path = filepath.Join("..", "..", "docs", "dashboard.png")
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot (%d bytes) written to %s", len(png), path)
	})
	t.Run("keyboard", func(t *testing.T) {
		b.do(chromedp.KeyEvent("\t"))
		if got := b.eval(`document.activeElement.className + "|" + getComputedStyle(document.activeElement).outlineStyle`); got != "skip|solid" {
			t.Errorf("the first Tab focuses %q, want the skip link with a visible outline", got)
		}
		// The skip link passes the attention list: the next Tab reaches
		// the first plugin.
		b.do(chromedp.KeyEvent("\r"), chromedp.KeyEvent("\t"))
		if got := b.eval(`document.activeElement.textContent + "|" + getComputedStyle(document.activeElement).outlineStyle`); got != "fx-nogrant|solid" {
			t.Errorf("the skip link and Tab reach %q, want the first plugin's link with a visible outline", got)
		}
	})

	t.Run("live update without reload", func(t *testing.T) {
		b.eval(`window.__sameDocument = "yes"`)
		b.eval(`document.querySelector('tr[data-name="fx-upgrade"] a').focus(), "ok"`)
		openfief("plugin", "approve", "fx-upgrade", "--yes")
		b.waitFor(`(() => { const tr = document.querySelector('tr[data-name="fx-upgrade"]'); return tr && tr.innerText.includes("Nothing pending") && !tr.innerText.includes("RunningPreviousVersion") && tr.innerText.includes("Running") })()`)
		if got := b.eval(`window.__sameDocument`); got != "yes" {
			t.Errorf("the page was reloaded (window state lost: %q)", got)
		}
		if got := b.eval(`document.activeElement.textContent`); got != "fx-upgrade" {
			t.Errorf("the redraw moved the keyboard focus to %q, want it kept on fx-upgrade's link", got)
		}
		// Its attention item went with the approval, without a reload;
		// revoked, it comes back.
		b.waitFor(`!document.querySelector('#attention li[data-plugin="fx-upgrade"]')`)
		openfief("plugin", "revoke", "fx-upgrade", "--yes")
		b.waitFor(`(() => { const li = document.querySelector('#attention li[data-plugin="fx-upgrade"]'); return li && li.dataset.kind === "ApprovalPending" && li.innerText.includes("(NoGrant)") })()`)
		if got := b.eval(`window.__sameDocument`); got != "yes" {
			t.Errorf("the page was reloaded (window state lost: %q)", got)
		}
	})

	t.Run("plugin page", func(t *testing.T) {
		b.do(chromedp.Navigate(base + "plugins/fx-nogrant"))
		b.waitFor(`document.body.dataset.updates >= 1`)
		text := b.eval(`document.getElementById("detail").innerText`)
		for _, w := range []string{"◐ Signed, not verified", "Pending approval", "Capabilities", "view",
			"Requested (spec.manifest", "No PluginGrant", "Nothing runs", "SignatureVerified", "signed by trusted signer " + ownerName,
			"ApprovalRequired", "NoGrant"} {
			if !strings.Contains(text, w) {
				t.Errorf("the plugin page lacks %q:\n%s", w, text)
			}
		}
		want := "openfief plugin approve fx-nogrant --kubeconfig " + kubeconfig
		if got := b.eval(`document.getElementById("approve-command").textContent`); got != want {
			t.Errorf("approve command %q, want %q", got, want)
		}
	})

	t.Run("approve from the page", func(t *testing.T) {
		dialogs := b.answerDialogs()
		// Declined: nothing is written.
		dialogs.accept.Store(false)
		b.do(chromedp.Click("#approve"))
		question := dialogs.next(t)
		for _, w := range []string{"Approve for plugin fx-nogrant: capability view?", "Signature: ◐ Signed, not verified", "writes the PluginGrant fx-nogrant"} {
			if !strings.Contains(question, w) {
				t.Errorf("the confirmation %q lacks %q", question, w)
			}
		}
		b.waitFor(`document.getElementById("approve-result").textContent === "Not approved."`)
		if p.grantExists(t, "fx-nogrant") {
			t.Fatal("a declined confirmation wrote the grant")
		}
		// A request for versions the owner did not see is refused.
		c := http.DefaultClient
		if status := postApproval(t, c, base, "hostile", origin, `{"plugin":"1","grant":""}`); status != http.StatusConflict {
			t.Errorf("an approval of an older version: %d, want 409", status)
		}
		if status := postApproval(t, c, base, "hostile", "", `{"plugin":"1","grant":""}`); status != http.StatusForbidden {
			t.Errorf("an approval without Origin: %d, want 403", status)
		}
		if status := postApproval(t, c, base, "hostile", "http://evil.example.com", `{"plugin":"1","grant":""}`); status != http.StatusForbidden {
			t.Errorf("an approval from another origin: %d, want 403", status)
		}
		if status := postApproval(t, c, origin+"/", "hostile", origin, `{"plugin":"1","grant":""}`); status != http.StatusUnauthorized {
			t.Errorf("an approval without the token: %d, want 401", status)
		}
		if p.grantExists(t, "hostile") {
			t.Fatal("a refused approval wrote the grant")
		}
		// Confirmed: the grant is written and the page follows.
		dialogs.accept.Store(true)
		b.do(chromedp.Click("#approve"))
		dialogs.next(t)
		b.waitFor(`document.getElementById("approve-result").textContent === "plugingrant/fx-nogrant created"`)
		b.waitFor(`document.getElementById("detail").innerText.includes("Nothing: the grant holds everything the manifest asks for.")`)
		if !p.grantExists(t, "fx-nogrant") {
			t.Fatal("the confirmed approval wrote no grant")
		}
		p.waitReady(t, "fx-nogrant", "Running")
	})

	t.Run("hostile manifest is text", func(t *testing.T) {
		b.do(chromedp.Navigate(base + "plugins/hostile"))
		b.waitFor(`document.body.dataset.updates >= 1`)
		if got := b.eval(`String(window.__xss)`); got != "undefined" {
			t.Errorf("the manifest's markup ran: window.__xss = %s", got)
		}
		text := b.eval(`document.getElementById("detail").innerText`)
		for _, w := range []string{`<script>window.__xss=1</script>`, `<img src=x onerror=\"window.__xss=2\">`} {
			if !strings.Contains(text, w) {
				t.Errorf("the page does not show %q as text:\n%s", w, text)
			}
		}
		if n := b.eval(`String(document.querySelectorAll("#detail img, #detail script").length)`); n != "0" {
			t.Errorf("%s img or script elements in the plugin's page", n)
		}
		// The policy itself, enforced by the browser: an inline script does not run.
		if got := b.eval(`(() => { const s = document.createElement("script"); s.textContent = "window.__inline = 1"; document.body.appendChild(s); return String(window.__inline) })()`); got != "undefined" {
			t.Errorf("an inline script ran despite the Content-Security-Policy: %s", got)
		}
	})

	t.Run("phone width", func(t *testing.T) {
		b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		b.do(chromedp.Navigate(base))
		b.waitFor(`document.body.dataset.updates >= 1`)
		if got := b.eval(`String(document.documentElement.scrollWidth <= document.documentElement.clientWidth) + " " + document.documentElement.scrollWidth + "/" + document.documentElement.clientWidth`); !strings.HasPrefix(got, "true") {
			t.Errorf("the page overflows a 390 px screen sideways (scrollWidth/clientWidth %s)", strings.TrimPrefix(got, "false "))
		}
		if got := b.eval(`getComputedStyle(document.getElementById("plugins-region")).overflowX`); got != "auto" {
			t.Errorf("the table's region scrolls with overflow-x %q, want auto", got)
		}
		b.do(chromedp.Navigate(base + "plugins/hostile"))
		b.waitFor(`document.body.dataset.updates >= 1`)
		if got := b.eval(`String(document.documentElement.scrollWidth <= document.documentElement.clientWidth) + " " + document.documentElement.scrollWidth + "/" + document.documentElement.clientWidth`); !strings.HasPrefix(got, "true") {
			t.Errorf("the plugin's page overflows a 390 px screen sideways (scrollWidth/clientWidth %s)", strings.TrimPrefix(got, "false "))
		}
	})

	t.Run("no other local listener gets the token", func(t *testing.T) { checkOtherListeners(t, b, base, origin) })

	t.Logf("browser part took %s", time.Since(browserStart).Round(time.Millisecond))
}

// checkOtherListeners plays another local user's server on another
// loopback port, visited in the browser that has the dashboard open: its
// page tries what a page can to learn the dashboard's credential, and the
// server records every byte the browser sends it. Browsers share cookies
// between the ports of a host, so a cookie credential would arrive here
// with the first request (OF-12).
func checkOtherListeners(t *testing.T, b *browser, base, dashOrigin string) {
	token := strings.Trim(strings.TrimPrefix(base, dashOrigin), "/")
	var (
		mu       sync.Mutex
		received []string
		reports  int
	)
	page := `<!doctype html><html><head><meta charset="utf-8"><title>another local server</title></head><body><script>
(async () => {
  const dash = ` + "`" + dashOrigin + "`" + `;
  const seen = { cookie: document.cookie, referrer: document.referrer, history: history.length };
  try { const r = await fetch(dash + "/", { credentials: "include" }); seen.cors = await r.text(); } catch (e) { seen.cors = "refused: " + e; }
  try { const r = await fetch(dash + "/events", { credentials: "include", mode: "no-cors" }); seen.noCors = r.type; } catch (e) { seen.noCors = "refused: " + e; }
  const f = document.createElement("iframe");
  f.src = dash + "/";
  document.body.appendChild(f);
  await new Promise(r => setTimeout(r, 500));
  try { seen.frame = f.contentWindow.location.href; } catch (e) { seen.frame = "refused: " + e; }
  const w = window.open(dash + "/");
  await new Promise(r => setTimeout(r, 500));
  try { seen.window = w && w.location.href; } catch (e) { seen.window = "refused: " + e; }
  if (w) w.close();
  await fetch("/report", { method: "POST", body: JSON.stringify(seen) });
  document.body.dataset.reported = "yes";
})();
</script></body></html>`
	other := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, err := httputil.DumpRequest(r, true)
		mu.Lock()
		if err == nil {
			received = append(received, string(dump))
		}
		if r.URL.Path == "/report" {
			reports++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = other.Serve(ln) }()
	t.Cleanup(func() { _ = other.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	for _, host := range []string{"127.0.0.1", "localhost"} {
		b.do(chromedp.Navigate(fmt.Sprintf("http://%s:%d/", host, port)))
		b.waitFor(`document.body.dataset.reported === "yes"`)
	}
	mu.Lock()
	defer mu.Unlock()
	if reports != 2 {
		t.Fatalf("the other server's page reported %d times, want 2: the test saw nothing", reports)
	}
	for _, req := range received {
		if strings.Contains(req, token) {
			t.Errorf("another local listener received the dashboard's token:\n%s", req)
		}
	}
	t.Logf("the other listener received %d requests, none with the token", len(received))
}

// checkHTTP checks the server's guards with a plain client: the token in
// the path, the Host header, no cookie, and the headers on every answer.
func checkHTTP(t *testing.T, base, origin string) {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u, host string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	token := strings.Trim(strings.TrimPrefix(base, origin), "/")
	for what, u := range map[string]string{
		"no token": origin + "/", "no token, events": origin + "/events", "no token, a page": origin + "/plugins/hostile",
		"the token as a query": origin + "/?token=" + token, "wrong token": origin + "/00000000000000000000000000000000/",
	} {
		if resp := get(u, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %s, want 401", what, resp.Status)
		}
	}
	if resp := get(base, "evil.example.com:"+strings.TrimPrefix(origin, "http://127.0.0.1:")); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a rebound Host header: %s, want 421", resp.Status)
	}
	resp := get(base, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with the token: %s", resp.Status)
	}
	if set := resp.Header.Values("Set-Cookie"); len(set) != 0 {
		t.Errorf("the dashboard set a cookie, which browsers send to every port of the host: %q", set)
	}
	for h, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"Content-Type":            "text/html; charset=utf-8",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if resp := get(base+"assets/app.js", ""); resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	if resp := get(base+"assets/table.html", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a template served as an asset: %s", resp.Status)
	}
}

// waitServing waits until the dashboard answers (its watches have synced).
func waitServing(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard did not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chromiumPath finds Debian's Chromium, which make test-deps installs when
// it can; without it the test cannot run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("the browser test needs Debian's chromium, which is not installed: run make test-deps as root (%v)", err)
	}
	return p
}

// browser is one headless Chromium with a page.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts Chromium headless with a fresh profile and the flags
// that keep it off the network (without them it stalls on a closed one).
func newBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium keeps its singleton socket in a folder of TMPDIR's,
		// which it removes only on a clean exit, and the test ends it with
		// a kill: without this, every run left one in /tmp.
		chromedp.Env("TMPDIR=" + t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first run starts the browser; it lives as long as ctx, so it is
	// started here and not under a step's timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return &browser{t: t, ctx: ctx}
}

// do runs steps, failing the test after 60 s.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression whose value is a string. The page
// must not be navigating: a wait for the page that follows a navigation is
// waitFor's.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := b.tryEval(expr, 30*time.Second)
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// tryEval evaluates a JavaScript expression whose value is a string, giving
// up after timeout.
func (b *browser) tryEval(expr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		return "", err
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	return fmt.Sprint(v), nil
}

// waitFor waits until a JavaScript expression is true in the page. An
// expression that throws counts as false, and so does an evaluation that a
// navigation interrupted (the launcher's redirect, a link followed): the
// page it waits for may be the next one. Any other error fails at once.
func (b *browser) waitFor(expr string) {
	b.t.Helper()
	const patience = 60 * time.Second
	deadline := time.Now().Add(patience)
	// Mid-navigation the document may have no body yet: that is "not yet".
	check := "(() => { try { return String(Boolean(" + expr + ")) } catch (e) { return 'false' } })()"
	var last error
	for {
		got, err := b.tryEval(check, max(time.Until(deadline), time.Second))
		switch {
		case err == nil && got == "true":
			return
		case err != nil && !navigationError(err):
			b.t.Fatalf("waiting for %s: %v", expr, err)
		case err != nil:
			last = err
		}
		if time.Now().After(deadline) {
			page, perr := b.tryEval(`document.body.innerText`, 5*time.Second)
			if perr != nil {
				page = "(unreadable: " + perr.Error() + ")"
			}
			overtaken := ""
			if last != nil {
				overtaken = " (the last evaluation a navigation overtook: " + last.Error() + ")"
			}
			b.t.Fatalf("timed out after %s waiting for %s%s; the page says:\n%s", patience, expr, overtaken, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// navigationErrors are the messages with which Chromium answers an
// evaluation that a navigation overtook: the page (or its JavaScript
// context) it ran in went away, and the next one is not ready yet.
var navigationErrors = []string{
	"Inspected target navigated or closed",
	"Execution context was destroyed",
	"Cannot find context with specified id",
	"Cannot find default execution context",
}

// navigationError reports whether err is an evaluation that a navigation
// interrupted, to be tried again on the page that follows.
func navigationError(err error) bool {
	var cdpErr *cdproto.Error
	if !errors.As(err, &cdpErr) {
		return false
	}
	for _, m := range navigationErrors {
		if strings.Contains(cdpErr.Message, m) {
			return true
		}
	}
	return false
}

// rows returns each table row's visible text by plugin name.
func (b *browser) rows() map[string]string {
	b.t.Helper()
	raw := b.eval(`JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll("#plugins tbody tr")).map(tr => [tr.dataset.name, tr.innerText])))`)
	out := map[string]string{}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		b.t.Fatalf("%v: %s", err, raw)
	}
	return out
}

// dialogs answers the page's JavaScript dialogs: each one's message goes to
// seen, and it is accepted or dismissed as accept says.
type dialogs struct {
	accept atomic.Bool
	seen   chan string
}

// next returns the message of the next dialog the page opened.
func (d *dialogs) next(t *testing.T) string {
	t.Helper()
	select {
	case m := <-d.seen:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("the page opened no confirmation dialog")
		return ""
	}
}

// answerDialogs starts answering the page's dialogs until the browser ends.
func (b *browser) answerDialogs() *dialogs {
	d := &dialogs{seen: make(chan string, 4)}
	go func() {
		for ev, err := range chromedp.Events(b.ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			if _, err := chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: d.accept.Load()}); err != nil {
				return
			}
			d.seen <- ev.Message
		}
	}()
	return d
}

// postApproval posts an approval of plugin name as from origin ("" sends
// none) and returns the status.
func postApproval(t *testing.T, c *http.Client, base, name, origin, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"plugins/"+name+"/approve", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWaitForSurvivesNavigation waits on a page that reloads itself many
// times before it is done, as the launcher file hands over to the
// dashboard: evaluations that a reload overtakes are "not yet", not a
// failure.
func TestWaitForSurvivesNavigation(t *testing.T) {
	chromium := chromiumPath(t)
	const reloads = 30
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><script>
const n = Number(sessionStorage.getItem("n") || 0) + 1;
sessionStorage.setItem("n", String(n));
if (n < %d) { setTimeout(() => location.reload(), 5); } else { document.documentElement.dataset.done = "yes"; }
</script></head><body>loading</body></html>`, reloads)
	}))
	t.Cleanup(srv.Close)
	b := newBrowser(t, chromium)
	b.do(chromedp.Navigate(srv.URL))
	b.waitFor(`document.documentElement.dataset.done === "yes"`)
	if got := b.eval(`sessionStorage.getItem("n")`); got != fmt.Sprint(reloads) {
		t.Errorf("the wait ended after %s loads, want %d", got, reloads)
	}
}
