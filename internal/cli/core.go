package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
)

// EnvCoreURL names the environment variable that points the CLI at the
// core's owner API directly; `openfief dev` writes it into its env file,
// because its in-process core has no Service endpoint (docs/core.md).
const EnvCoreURL = "OPENFIEF_CORE_URL"

// maxCoreAnswer bounds what the CLI reads of an owner API answer.
const maxCoreAnswer = 1 << 20

// coreAPI reaches openfief-core's owner API: directly at a URL, or through
// the API server's service proxy with the owner's own credentials, so the
// API server authorizes the call (get or create on services/proxy of
// openfief-core, docs/core.md). Either way every request carries the owner's
// token (OF-18), minted at the first request.
type coreAPI struct {
	base   string
	client *http.Client
	// via says how the core was reached, for messages.
	via string
	// mint returns a new owner token; token holds the one minted, at
	// minted. mu guards both: the dashboard's poll may share the client.
	mint   func(context.Context) (string, error)
	mu     sync.Mutex
	token  string
	minted time.Time
}

// tokenReuse is how long a minted owner token is sent before a new one is
// minted: half its lifetime, so a long-running caller (the dashboard)
// never sends one about to expire.
const tokenReuse = ownerapi.TokenSeconds * time.Second / 2

// coreAPI returns the owner API client: direct when coreURL is set,
// otherwise through the service proxy of the current kubeconfig. Either
// way the token goes only where ownerURLRule allows, and no redirect is
// followed (ownertransport.go): a coreURL that breaks the rule is refused
// here, before any connection and before a token is minted.
func (e *Env) coreAPI(coreURL string, timeout time.Duration) (*coreAPI, error) {
	if coreURL != "" {
		u, err := parseOwnerURL(coreURL)
		if err != nil {
			return nil, exitf(ExitUsage, "--core-url %q: %v", shownURL(coreURL), err)
		}
		return &coreAPI{base: strings.TrimSuffix(coreURL, "/"), client: directOwnerClient(u, timeout), via: display.Text(coreURL), mint: e.mint()}, nil
	}
	cfg, err := e.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	if _, err := parseOwnerURL(cfg.Host); err != nil {
		return nil, exitf(ExitUsage, "the owner API through the kubeconfig's server %q: %v", shownURL(cfg.Host), err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, exitf(ExitFailure, "connecting to the API server: %w", err)
	}
	// HTTPClientFor returns a new client, which like any http.Client would
	// follow redirects (the service proxy passes a backend's 3xx on, and the
	// transport would add the kubeconfig's credentials at the new address).
	hc.CheckRedirect = refuseOwnerRedirect
	base := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/namespaces/" + url.PathEscape(e.Namespace) +
		"/services/" + ownerapi.ServiceName + ":" + ownerapi.ServicePort + "/proxy"
	return &coreAPI{base: base, client: hc, via: "the API server's service proxy to " + ownerapi.ServiceName, mint: e.mint()}, nil
}

// mint is how the owner's token is minted: TokenRequest, or the test's.
func (e *Env) mint() func(context.Context) (string, error) {
	if e.ownerMint != nil {
		return e.ownerMint
	}
	return e.ownerToken
}

// errCoreStatus is an answer other than 200: from the core itself
// (fromCore, its JSON error), or from the API server's service proxy when no
// core answered (no Service, no endpoint, no right to proxy).
type errCoreStatus struct {
	code     int
	msg      string
	fromCore bool
	// reason is the core's refusal of the owner's token (ownerapi.Reason...).
	reason string
}

func (e *errCoreStatus) Error() string {
	switch {
	case !e.fromCore:
		return fmt.Sprintf("no openfief-core answered (HTTP %d): %s", e.code, display.Message(e.msg))
	case e.refusedOwner():
		return fmt.Sprintf("openfief-core refused the owner's token (%d): %s", e.code, display.Message(e.msg))
	}
	return fmt.Sprintf("the core answered %d: %s", e.code, display.Message(e.msg))
}

// refusedOwner reports whether the core refused the owner's credential,
// rather than the request itself.
func (e *errCoreStatus) refusedOwner() bool { return e.fromCore && e.reason != "" }

// maxErrorText bounds the text of an error answer the CLI repeats.
const maxErrorText = 512

// do sends one request and decodes a 200 answer's JSON into out.
func (c *coreAPI) do(ctx context.Context, method, path string, body io.Reader, header http.Header, out any) error {
	resp, err := c.send(ctx, method, path, body, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxCoreAnswer))
	if err != nil {
		return fmt.Errorf("reading the core's answer: %w", err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the core's answer does not decode: %w", err)
	}
	return nil
}

// send sends one request with the owner's token and returns a 200 answer,
// its body unread (the caller closes it); any other answer is an error.
func (c *coreAPI) send(ctx context.Context, method, path string, body io.Reader, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	token, err := c.ownerToken(ctx)
	if err != nil {
		return nil, err
	}
	req.Header.Set(ownerapi.HeaderOwnerToken, token)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the core through %s: %w", c.via, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, &errCoreRedirect{code: resp.StatusCode, location: resp.Header.Get("Location")}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxCoreAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the core's answer: %w", err)
	}
	var e ownerapi.ErrorResponse
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		if e.Reason == ownerapi.ReasonTokenRefused {
			c.forget(token) // expired or revoked: the next request mints anew
		}
		return nil, &errCoreStatus{code: resp.StatusCode, msg: e.Error, fromCore: true, reason: e.Reason}
	}
	msg := strings.TrimSpace(string(raw))
	var st struct {
		Kind, Message string
	}
	if json.Unmarshal(raw, &st) == nil && st.Kind == "Status" && st.Message != "" {
		msg = st.Message // the API server's own reason, such as "no endpoints available"
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "..."
	}
	return nil, &errCoreStatus{code: resp.StatusCode, msg: msg}
}

// ownerToken returns the owner token to send, minting one when there is
// none yet or the one held is older than tokenReuse.
func (c *coreAPI) ownerToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && time.Since(c.minted) < tokenReuse {
		return c.token, nil
	}
	token, err := c.mint(ctx)
	if err != nil {
		return "", err
	}
	c.token, c.minted = token, time.Now()
	return token, nil
}

// forget drops token if it is still the one held.
func (c *coreAPI) forget(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.token = ""
	}
}

// status reads one instance's sync status.
func (c *coreAPI) status(ctx context.Context, name string) (ownerapi.InstanceStatus, error) {
	var st ownerapi.InstanceStatus
	err := c.do(ctx, http.MethodGet, ownerapi.StatusPath(name), nil, nil, &st)
	return st, err
}

// defaultCoreURL is the --core-url default: $OPENFIEF_CORE_URL.
func defaultCoreURL() string { return os.Getenv(EnvCoreURL) }

// printCoreStatus describes what the core recorded of a plugin's syncs.
func printCoreStatus(w io.Writer, now time.Time, st ownerapi.InstanceStatus, err error) {
	if err != nil {
		var ce *errCoreStatus
		if errors.As(err, &ce) && !ce.fromCore {
			fmt.Fprintf(w, "Core:         unknown: %s\n", display.Message(ce.Error()))
			return
		}
		fmt.Fprintf(w, "Core:         unknown: %s\n", display.Message(err.Error()))
		return
	}
	fmt.Fprintln(w, "Core (openfief-core):")
	// A view's runs are exports, recorded where a connector's syncs are.
	what := "sync"
	switch {
	case st.Scheduled && st.View:
		what = "export"
		fmt.Fprintln(w, "  Called:     yes, as a view: sent what is new after each import and on a schedule")
	case st.Scheduled:
		fmt.Fprintln(w, "  Called:     yes, as a connector on a schedule")
	default:
		fmt.Fprintln(w, "  Called:     no (not a running connector or view)")
	}
	label := func(s string) string { return fmt.Sprintf("%-11s", s+":") }
	last, next := label("Last "+what), label("Next "+what)
	switch {
	case st.LastSync == nil:
		fmt.Fprintf(w, "  %s never\n", last)
	case st.LastOK:
		fmt.Fprintf(w, "  %s %s (%s ago), succeeded\n", last, st.LastSync.UTC().Format(time.RFC3339), display.Age(now, *st.LastSync))
	default:
		fmt.Fprintf(w, "  %s %s (%s ago), failed\n", last, st.LastSync.UTC().Format(time.RFC3339), display.Age(now, *st.LastSync))
	}
	if st.LastError != "" {
		fmt.Fprintf(w, "  Last error: %s\n", display.Message(st.LastError))
	}
	if st.NextSync != nil && st.Scheduled {
		fmt.Fprintf(w, "  %s %s\n", next, st.NextSync.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "  %s none planned\n", next)
	}
	r := st.Rows
	fmt.Fprintf(w, "  Rows:       %d stored (batches %d, transactions %d, postings %d, balances %d, prices %d, FX rates %d, index readings %d, problems %d)\n",
		st.RowsTotal, r.Batches, r.Transactions, r.Postings, r.Balances, r.Prices, r.FxRates, r.IndexReadings, r.Problems)
}
