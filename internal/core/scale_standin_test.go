package core

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/arkadiuss/openfief/internal/plugins"
	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// The scale benchmark's stand-in (scale_bench_test.go) runs as a child
// process, this test binary started again, so that the core's memory is
// the parent's alone. It plays two parts:
//   - the API server's token signer: TokenRequest for the core's
//     ServiceAccount, answered with a ten-minute ES256 token for the
//     audiences asked, as kube-apiserver signs them with an ECDSA key (an
//     RSA key's signature would cost the shared machine ten times the
//     CPU, which is the API server's, not the core's); its public key and
//     issuer go where the SDK's verifier reads them (what the operator
//     publishes in openfief-sa-jwks);
//   - every connector instance: /p/<instance>/ serves the SDK's
//     RequireCore with the SDK's JWKSVerifier for that instance alone in
//     front of a ConnectorService that answers one FX rate, with the time
//     the call arrived (Unix nanoseconds) as its watermark, so the core's
//     side can tell how late each sync began.
//
// The child prints its address on its first line of output, serves until
// its standard input closes, and then prints its counts as JSON; GET
// /counts answers them so far.

// standInEnv names the directory of the stand-in's key files; set, the
// test binary is the stand-in.
const standInEnv = "OPENFIEF_CORE_SCALE_STANDIN"

// standInPrefix is where the instances' connectors are served, and
// standInCountsPath where the stand-in's counts so far are.
const (
	standInPrefix     = "/p/"
	standInCountsPath = "/counts"
)

// standInCounts is what the stand-in reports when it stops.
type standInCounts struct {
	// Calls is every Sync the connectors answered; Refused every call
	// whose token the SDK refused; Minted the tokens signed.
	Calls, Refused, Minted int64
	// Instances is how many instances were called at least once; Twice
	// how many were ever called twice at once (never, for the scheduler).
	Instances, Twice int
}

// serveStandInIfAsked runs the stand-in and exits when the environment asks
// for it; TestMain calls it first.
func serveStandInIfAsked() {
	dir := os.Getenv(standInEnv)
	if dir == "" {
		return
	}
	if err := serveStandIn(dir, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stand-in:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveStandIn(dir string, stop io.Reader, out io.Writer) error {
	s, err := newScaleStandIn(dir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: s, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	if _, err := fmt.Fprintln(out, ln.Addr().String()); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return json.NewEncoder(out).Encode(s.counts())
}

// scaleStandIn is the stand-in's state.
type scaleStandIn struct {
	dir    string
	issuer string
	signer jose.Signer
	conn   http.Handler

	calls, refused, minted atomic.Int64

	mu        sync.Mutex
	verifiers map[string]http.Handler
	inflight  map[string]int
	called    map[string]int
	twice     map[string]bool
}

func newScaleStandIn(dir string) (*scaleStandIn, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	const kid = "scale-key"
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return nil, err
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	const issuer = "https://kubernetes.default.svc.cluster.local"
	if err := os.WriteFile(filepath.Join(dir, openfief.JWKSFileName), set, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, openfief.IssuerFileName), []byte(issuer), 0o600); err != nil {
		return nil, err
	}
	s := &scaleStandIn{dir: dir, issuer: issuer, signer: signer,
		verifiers: map[string]http.Handler{}, inflight: map[string]int{}, called: map[string]int{}, twice: map[string]bool{}}
	_, s.conn = connectorv1connect.NewConnectorServiceHandler(scaleConnector{s: s}, connect.WithReadMaxBytes(openfief.MaxMessageBytes))
	return s, nil
}

// ServeHTTP routes the token requests and the instances' calls.
func (s *scaleStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, standInPrefix); ok {
		instance, _, _ := strings.Cut(rest, "/")
		h, err := s.instance(instance)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		http.StripPrefix(standInPrefix+instance, h).ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == standInCountsPath {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.counts())
		return
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/serviceaccounts/"+DefaultServiceAccount+"/token") {
		s.token(w, r)
		return
	}
	http.NotFound(w, r)
}

// instance returns the instance's connector behind the SDK's RequireCore,
// with a verifier of its own, as the instance's own process would serve it.
func (s *scaleStandIn) instance(name string) (http.Handler, error) {
	if err := plugins.ValidateName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.verifiers[name]; ok {
		return h, nil
	}
	v, err := openfief.NewJWKSVerifier(s.dir, name, plugins.DefaultCoreSubject)
	if err != nil {
		return nil, err
	}
	conn := s.conn
	h := openfief.RequireCore(countingVerifier{v: v, refused: &s.refused}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), standInInstance{}, name)))
	}))
	s.verifiers[name] = h
	return h, nil
}

// countingVerifier counts the tokens the SDK refused.
type countingVerifier struct {
	v       openfief.CoreVerifier
	refused *atomic.Int64
}

func (c countingVerifier) Verify(token string) error {
	err := c.v.Verify(token)
	if err != nil {
		c.refused.Add(1)
	}
	return err
}

type standInInstance struct{}

// token answers a TokenRequest as the API server does for the core.
func (s *scaleStandIn) token(w http.ResponseWriter, r *http.Request) {
	// client-go sends protobuf or JSON; either decodes.
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var tr authenticationv1.TokenRequest
	if _, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, &tr); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	life := 10 * time.Minute
	if e := tr.Spec.ExpirationSeconds; e != nil && *e > 0 {
		life = time.Duration(*e) * time.Second
	}
	exp := now.Add(life)
	tok, err := jwt.Signed(s.signer).Claims(jwt.Claims{
		Issuer: s.issuer, Subject: plugins.DefaultCoreSubject, Audience: jwt.Audience(tr.Spec.Audiences),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(exp),
	}).Serialize()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.minted.Add(1)
	tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenRequest"
	tr.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(exp)}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(&tr)
}

func (s *scaleStandIn) counts() standInCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return standInCounts{Calls: s.calls.Load(), Refused: s.refused.Load(), Minted: s.minted.Load(), Instances: len(s.called), Twice: len(s.twice)}
}

// standInDay is the day before the first rate each instance delivers; each
// call delivers the next day's, so every sync stores a row.
var standInDay = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// scaleConnector answers every instance's Sync with one FX rate.
type scaleConnector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler
	s *scaleStandIn
}

func (c scaleConnector) Sync(ctx context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	arrived := time.Now()
	name, _ := ctx.Value(standInInstance{}).(string)
	s := c.s
	s.mu.Lock()
	s.inflight[name]++
	s.called[name]++
	day := s.called[name]
	if s.inflight[name] > 1 {
		s.twice[name] = true
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight[name]--
		s.mu.Unlock()
	}()
	s.calls.Add(1)
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: &connectorv1.Delivery{
		BatchId:     req.Msg.GetBatchId(),
		Institution: &connectorv1.Institution{Id: "nbp", Name: "NBP"},
		FxRates:     []*connectorv1.FxRate{{Date: standInDay.AddDate(0, 0, day).Format(time.DateOnly), BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2840"}},
		Watermark:   strconv.FormatInt(arrived.UnixNano(), 10),
	}}), nil
}

// startStandIn runs this test binary as the stand-in and returns its
// address, the directory of its key files and a stop function returning
// its counts.
func startStandIn(tb testing.TB) (addr, dir string, stop func() standInCounts) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dir = tb.TempDir()
	cmd := exec.Command(exe, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), standInEnv+"="+dir)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	first, err := lines.ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		tb.Fatal(fmt.Errorf("the stand-in did not start: %w", err))
	}
	addr = strings.TrimSpace(first)
	var once sync.Once
	var counts standInCounts
	stop = func() standInCounts {
		once.Do(func() {
			_ = stdin.Close()
			_ = json.NewDecoder(lines).Decode(&counts)
			_ = cmd.Wait()
		})
		return counts
	}
	tb.Cleanup(func() { stop() })
	return addr, dir, stop
}

// standInCountsNow asks the stand-in at addr for its counts so far.
func standInCountsNow(tb testing.TB, addr string) standInCounts {
	tb.Helper()
	resp, err := http.Get("http://" + addr + standInCountsPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var c standInCounts
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&c); err != nil {
		tb.Fatal(err)
	}
	return c
}
