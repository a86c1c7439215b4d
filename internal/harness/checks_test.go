package harness

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
)

func configFile(entrypoint, env []string) *v1.ConfigFile {
	return &v1.ConfigFile{Config: v1.Config{Entrypoint: entrypoint, Env: env}}
}

// seeing is a Runtime that sees the network and reports fixed attempts.
type seeing struct {
	Runtime
	attempts []Attempt
}

func (s seeing) Attempts() []Attempt { return s.attempts }

func TestNetworkCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		rt     Runtime
		status Status
		reason string
	}{
		"nothing tried": {seeing{}, Pass, "tried no connection"},
		"dns and tcp": {seeing{attempts: []Attempt{
			{Protocol: "dns", Address: "127.0.0.53:53", Query: "direct.example.com\x1b"},
			{Protocol: "tcp", Address: "192.0.2.10:443"},
			{Protocol: "tcp", Address: "192.0.2.10:443"},
		}}, Fail, `dns direct.example.com\x1b, tcp 192.0.2.10:443`},
		"blind": {&localRuntime{}, Skip, "not judged"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &run{rt: tc.rt, results: map[string]Result{}}
			r.checkNetwork()
			got := r.results[CheckNetwork]
			if got.Status != tc.status || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("%+v, want %s with %q", got, tc.status, tc.reason)
			}
		})
	}
}

func TestEgressCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		manifest string
		allowed  []string
		denied   []denial
		status   Status
		reason   string
	}{
		"declared host": {`{"capabilities":["connector"],"egress":["api.example.com"]}`, []string{"api.example.com"}, nil, Pass, "api.example.com"},
		"no host":       {`{"capabilities":["connector"]}`, nil, nil, Pass, "no host"},
		"undeclared": {`{"capabilities":["connector"],"egress":["api.example.com"]}`, []string{"api.example.com"},
			[]denial{{"evil.example.com:443", egress.ReasonNotAllowed}}, Fail, "evil.example.com:443 (not_on_allowlist)"},
		"owner's host": {`{"capabilities":["view"],"ownerEgress":1}`, nil,
			[]denial{{"dav.example.com:443", egress.ReasonNotAllowed}, {"dav.example.com:443", egress.ReasonNotAllowed}}, Pass, "owner's slots"},
		"more than the owner's slots": {`{"capabilities":["view"],"ownerEgress":1}`, nil,
			[]denial{{"dav.example.com:443", egress.ReasonNotAllowed}, {"other.example.com:443", egress.ReasonNotAllowed}}, Fail, "other.example.com"},
		"without its token": {`{"capabilities":["connector"],"egress":["api.example.com"]}`, nil,
			[]denial{{"api.example.com:443", egress.ReasonNoCredentials}}, Fail, "no_credentials"},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := plugins.ParseManifestLabel(tc.manifest)
			if err != nil {
				t.Fatal(err)
			}
			r := &run{manifest: m, results: map[string]Result{}, egress: &egressRecord{allowed: tc.allowed, denied: tc.denied}}
			r.checkEgress()
			got := r.results[CheckEgress]
			if got.Status != tc.status || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("%+v, want %s with %q", got, tc.status, tc.reason)
			}
		})
	}
}

// TestProxyRecordsWhatThePluginAsked runs the harness's egress proxy and
// asks it as a plugin would: a declared host goes through to the
// stand-in, another host and a wrong token are refused and recorded.
func TestProxyRecordsWhatThePluginAsked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &egressRecord{}
	stop, err := startProxy(ln, Instance, []string{"api.example.com:443"}, "egress-token", rec)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	connectVia := func(target, token string) string {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		auth := basic("plugin:" + token)
		if _, err := c.Write([]byte("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\nProxy-Authorization: Basic " + auth + "\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		return string(buf[:n])
	}
	if got := connectVia("api.example.com:443", "egress-token"); !strings.Contains(got, " 200 ") {
		t.Errorf("declared host: %q", got)
	}
	if got := connectVia("evil.example.com:443", "egress-token"); !strings.Contains(got, " 403 ") {
		t.Errorf("undeclared host: %q", got)
	}
	if got := connectVia("api.example.com:443", "other-token"); !strings.Contains(got, " 407 ") {
		t.Errorf("wrong token: %q", got)
	}
	allowed, denied := rec.snapshot()
	if strings.Join(allowed, ",") != "api.example.com" || len(denied) != 2 ||
		denied[0] != (denial{"evil.example.com:443", egress.ReasonNotAllowed}) || denied[1].reason != egress.ReasonUnauthenticated {
		t.Errorf("allowed %v, denied %v", allowed, denied)
	}
}

func basic(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// labelled is an empty image with the manifest label and an entrypoint.
func labelled(t *testing.T, label string) v1.Image {
	t.Helper()
	img, err := mutate.Config(empty.Image, v1.Config{Entrypoint: []string{"/plugin"}, Labels: map[string]string{plugins.ManifestLabel: label}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func neverStart(t *testing.T) Starter {
	return func(context.Context, Pod) (Runtime, error) {
		t.Error("the plugin was started")
		return nil, ErrNoSandbox
	}
}

// TestRunStopsBeforeStarting: an invalid label fails the label check and
// skips the rest; a config outside the schema is an error; neither starts
// the plugin. Without a sandbox the run says so.
func TestRunStopsBeforeStarting(t *testing.T) {
	rep, err := Run(t.Context(), Options{Image: labelled(t, `{"capabilities":[]}`), Name: "x", Start: neverStart(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rep.Get(CheckLabel); got.Status != Fail || !strings.Contains(got.Reason, "label.capabilities") {
		t.Errorf("label: %+v", got)
	}
	if got, _ := rep.Get(CheckResources); got.Status != Skip || len(rep.Checks) != len(Checks) {
		t.Errorf("report: %+v", rep)
	}

	schema := `{"capabilities":["connector"],"configSchema":{"type":"object","required":["url"]}}`
	if _, err := Run(t.Context(), Options{Image: labelled(t, schema), Start: neverStart(t)}); !errors.Is(err, ErrConfig) {
		t.Errorf("config outside the schema: %v", err)
	}

	if sandboxBuiltIn {
		return
	}
	if _, err := Run(t.Context(), Options{Image: labelled(t, `{"capabilities":["connector"]}`)}); !errors.Is(err, ErrNoSandbox) {
		t.Errorf("without a sandbox: %v", err)
	}
}
