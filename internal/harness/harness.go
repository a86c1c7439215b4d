package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/configschema"
	"github.com/arkadiuss/openfief/internal/plugins"
	openfief "github.com/arkadiuss/openfief/sdk/go"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1/viewv1connect"
)

// GracePeriod is how long a plugin has to exit after SIGTERM: the operator
// sets no terminationGracePeriodSeconds on a plugin's pod, so Kubernetes'
// default of 30 seconds applies.
const GracePeriod = 30 * time.Second

// ServeTimeout bounds how long the plugin may take to accept connections on
// its port after its start.
const ServeTimeout = 30 * time.Second

// callTimeout bounds each call the harness makes to the plugin.
const callTimeout = 30 * time.Second

// maxAnswerBytes bounds every answer the harness reads, as the core's
// DefaultMaxAnswerBytes does.
const maxAnswerBytes = 8<<20 - 64<<10

// maxOutput bounds what the harness keeps of the plugin's output.
const maxOutput = 64 << 10

// Signature is the verdict of `openfief plugin verify`'s check on the image,
// which the caller runs: the harness judges only the label itself.
type Signature struct {
	// Verified is true when a trusted signer signed the image.
	Verified bool
	// Detail names the signer, or why the image was refused.
	Detail string
}

// Options are what one run of the harness needs.
type Options struct {
	// Image is the plugin's image for this machine's platform; Name is how
	// the report names it.
	Image v1.Image
	Name  string
	// Signature is the signature check's verdict; nil when no signer was
	// given, which skips that half of the label check.
	Signature *Signature
	// Config is the instance's JSON config (OPENFIEF_CONFIG); empty is {}.
	Config []byte
	// Start runs the plugin; nil is NewRuntime.
	Start Starter
	// GracePeriod and ServeTimeout replace the constants of the same name
	// when set (tests).
	GracePeriod, ServeTimeout time.Duration
	// Now is the clock of the tokens; nil is time.Now.
	Now func() time.Time
}

// ErrConfig is wrapped when Options.Config does not match the manifest's
// configSchema: the operator would not run the plugin with it.
var ErrConfig = errors.New("the config does not match the manifest's configSchema")

// run is the state of one run: what the checks share.
type run struct {
	opts     Options
	manifest plugins.Manifest
	workload plugins.Workload
	mint     *minter
	rt       Runtime
	output   *boundedBuffer
	egress   *egressRecord
	// exitDone is closed once the process ended; exitStatus says how
	// (exitErr when the runtime could not tell).
	exitDone   chan struct{}
	exitStatus ExitStatus
	exitErr    error
	http       *http.Client
	results    map[string]Result
	// stopProxy stops the egress proxy, when one runs.
	stopProxy func()
}

// Run runs the image as the platform would and returns the report of every
// check. An error means the harness itself could not run (the image could
// not be read or the runtime not start); a plugin that breaks a rule is a
// failed check, not an error.
func Run(ctx context.Context, opts Options) (Report, error) {
	if opts.Start == nil {
		opts.Start = NewRuntime
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = GracePeriod
	}
	if opts.ServeTimeout <= 0 {
		opts.ServeTimeout = ServeTimeout
	}
	if len(bytes.TrimSpace(opts.Config)) == 0 {
		opts.Config = []byte("{}")
	}
	r := &run{opts: opts, results: map[string]Result{}, output: &boundedBuffer{max: maxOutput}, egress: &egressRecord{}}
	err := r.all(ctx)
	rep := Report{Image: opts.Name}
	for _, name := range Checks {
		res, ok := r.results[name]
		if !ok {
			res = Result{Status: Skip, Reason: "not judged: an earlier step could not run"}
		}
		res.Name = name
		rep.Checks = append(rep.Checks, res)
	}
	return rep, err
}

func (r *run) set(name string, s Status, format string, args ...any) {
	r.results[name] = Result{Name: name, Status: s, Reason: fmt.Sprintf(format, args...)}
}

// skipRest skips every check not yet judged, with reason.
func (r *run) skipRest(reason string) {
	for _, name := range Checks {
		if _, ok := r.results[name]; !ok {
			r.set(name, Skip, "%s", reason)
		}
	}
}

// all runs the checks in order: the label, then the plugin started once for
// the rest, stopped by the sigterm check.
func (r *run) all(ctx context.Context) error {
	cfg, err := r.opts.Image.ConfigFile()
	if err != nil {
		return fmt.Errorf("read the image's config: %w", err)
	}
	if !r.checkLabel(cfg) {
		r.skipRest("not run: the image has no valid manifest label")
		return nil
	}
	if err := configschema.Validate(r.manifest.ConfigSchema, r.opts.Config); err != nil {
		return fmt.Errorf("%w: %s", ErrConfig, clean(err.Error(), 400))
	}
	if r.workload, err = compileWorkload(r.manifest); err != nil {
		r.set(CheckLabel, Fail, "the operator would not run this manifest: %s", clean(err.Error(), 300))
		r.skipRest("not run: the operator would not run this manifest")
		return nil
	}
	if r.mint, err = newMinter(r.opts.Now); err != nil {
		return err
	}
	if err := r.start(ctx, cfg); err != nil {
		return err
	}
	defer func() {
		_ = r.rt.Close()
		if r.stopProxy != nil {
			r.stopProxy()
		}
	}()
	if !r.checkServes(ctx) {
		r.skipRest("not run: the plugin does not serve")
		r.checkNetwork()
		r.checkEgress()
		r.stop(ctx)
		return nil
	}
	r.checkAuth(ctx)
	r.checkSync(ctx)
	r.checkImportFile(ctx)
	r.checkPages(ctx)
	r.stop(ctx)
	r.checkEgress()
	r.checkNetwork()
	return nil
}

// start mints the pod's tokens, builds the pod, starts the runtime, and the
// egress proxy where the pod has egress.
func (r *run) start(ctx context.Context, cfg *v1.ConfigFile) error {
	now := r.opts.Now()
	var toks podTokens
	var err error
	if toks.core, err = r.mint.mint(plugins.ServiceAccountUsername(Instance), plugins.AudienceCore, now); err != nil {
		return err
	}
	if toks.egress, err = r.mint.mint(plugins.ServiceAccountUsername(Instance), plugins.AudienceEgress, now); err != nil {
		return err
	}
	jwks, err := r.mint.jwks()
	if err != nil {
		return err
	}
	pod, err := buildPod(r.opts.Image, cfg, r.workload, r.opts.Config, jwks, toks)
	if err != nil {
		return err
	}
	pod.Stdout, pod.Stderr = r.output, r.output
	if r.rt, err = r.opts.Start(ctx, pod); err != nil {
		return fmt.Errorf("start the plugin: %w", err)
	}
	if len(pod.Listen) > 0 {
		ln, err := r.rt.Listen("tcp", proxyAddress)
		if err != nil {
			return fmt.Errorf("start the egress proxy: %w", err)
		}
		stop, err := startProxy(ln, Instance, r.workload.AllowList, toks.egress, r.egress)
		if err != nil {
			return fmt.Errorf("start the egress proxy: %w", err)
		}
		r.stopProxy = stop
	}
	r.exitDone = make(chan struct{})
	go func() {
		r.exitStatus, r.exitErr = r.rt.Wait(context.WithoutCancel(ctx))
		close(r.exitDone)
	}()
	r.http = &http.Client{
		Transport: &http.Transport{
			DialContext:            r.rt.DialContext,
			DisableCompression:     true,
			ResponseHeaderTimeout:  callTimeout,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       callTimeout,
	}
	return nil
}

// pluginURL is where the plugin serves on its loopback.
func (r *run) pluginURL() string { return fmt.Sprintf("http://127.0.0.1:%d", r.workload.PluginPort) }

func (r *run) clientOptions() []connect.ClientOption {
	return []connect.ClientOption{connect.WithReadMaxBytes(maxAnswerBytes), connect.WithAcceptCompression("gzip", nil, nil)}
}

func (r *run) connector() connectorv1connect.ConnectorServiceClient {
	return connectorv1connect.NewConnectorServiceClient(r.http, r.pluginURL(), r.clientOptions()...)
}

func (r *run) view() viewv1connect.ViewServiceClient {
	return viewv1connect.NewViewServiceClient(r.http, r.pluginURL(), r.clientOptions()...)
}

// coreToken mints the token the core would send this instance, issued at iat.
func (r *run) coreToken(audience, subject string, iat time.Time) string {
	tok, err := r.mint.mint(subject, audience, iat)
	if err != nil {
		return ""
	}
	return tok
}

func (r *run) rightToken() string {
	return r.coreToken(openfief.InstanceAudience(Instance), plugins.DefaultCoreSubject, r.opts.Now())
}

// hasExited reports whether the plugin's process ended, and how.
func (r *run) hasExited() (ExitStatus, bool) {
	select {
	case <-r.exitDone:
		return r.exitStatus, true
	default:
		return ExitStatus{}, false
	}
}

// describeExit says how a process ended.
func describeExit(st ExitStatus) string {
	switch {
	case st.Signal != "":
		return "killed by " + st.Signal
	default:
		return fmt.Sprintf("exit code %d", st.Code)
	}
}

// outputTail is the end of the plugin's output, cleaned, for a reason.
func (r *run) outputTail() string {
	b := r.output.Bytes()
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return "; its output ends: " + clean(string(b), 300)
}

// boundedBuffer keeps the last max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.max {
		p = p[len(p)-b.max:]
	}
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return n, nil
}

func (b *boundedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

var _ io.Writer = (*boundedBuffer)(nil)

// dialPlugin tries the plugin's port once.
func (r *run) dialPlugin(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := r.rt.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", r.workload.PluginPort))
	if err != nil {
		return err
	}
	return c.Close()
}
