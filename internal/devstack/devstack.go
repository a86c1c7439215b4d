// Package devstack runs the whole OpenFief plugin platform on one machine:
// the full local control plane (etcd, kube-apiserver, controller-manager,
// scheduler, kwok), the CRDs and the openfief namespace, the operator, the
// egress proxy and openfief-core in this process, and a loopback OCI registry holding demo
// plugin images signed with a local owner key that the operator trusts. It
// backs `openfief dev`, `make demo` and the end-to-end suite (OF-5).
//
// Pods are played by kwok: they are scheduled, become Running and Ready,
// but no container runs. The demo images are the real nbp-fx plugin, built
// from this source tree by internal/images as `make images` builds it (or
// reused from its cache), in two versions signed by the local owner key,
// and the real webdav-csv view image beside it.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/egress/proxyserver"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// Options configures a Stack.
type Options struct {
	// Dir receives the kubeconfig, signers.json and the env file; required.
	Dir string
	// Nodes is the number of fake nodes; zero means one.
	Nodes int
	// Node selects kwok's fake nodes (the zero value) or one real node
	// (devcluster.NodeReal: root, `make node`, docs/node.md), on which the
	// plugins run as containers and NetworkPolicies are enforced. The
	// operator and the egress proxy still run in this process; with a real
	// node the proxy listens on the node's bridge address (see
	// installProxyOnNode).
	Node devcluster.NodeKind
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Logs receives the processes' and controllers' logs; nil writes them
	// to files in Dir only.
	Logs io.Writer
	// BinDir holds the control-plane binaries; empty means devcluster.BinDir().
	BinDir string
	// ProxyResolver and ProxyDialer replace the egress proxy's name
	// resolution and connections, and UnsafeAllowPrefixes exempts address
	// ranges from its refusals. Only the end-to-end suite sets them, to stand
	// in for an institution on loopback.
	ProxyResolver       egress.Resolver
	ProxyDialer         egress.Dialer
	UnsafeAllowPrefixes []netip.Prefix
	// RunAsServiceAccounts runs the operator, the egress proxy and the core
	// as their ServiceAccounts (OperatorUser, ProxyUser, CoreUser) through
	// impersonation, after applying the ServiceAccounts, roles and bindings
	// that deploy/operator, deploy/egress-proxy and deploy/core of the source
	// tree render: they may do exactly what an install lets them. The end-to-end suite sets it.
	RunAsServiceAccounts bool
	// WrapTransport, if set, wraps the operator's, the egress proxy's and
	// the core's connections to the API server (the end-to-end suite
	// records the requests refused with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// CoreResolve replaces where the core calls a plugin; nil means the
	// plugin's Service, which no process serves under kwok, or with a real
	// node that Service's ClusterIP, read from the API (no cluster DNS on
	// the node). The end-to-end suite points it at the plugin it runs as a
	// local process.
	CoreResolve core.Resolver
	// CoreScheduler replaces the core's schedule settings (interval,
	// jitter, first delay, backoff); the zero value keeps the defaults.
	CoreScheduler core.SchedulerOptions
	// LocalPlugins plays the kubelet for the demo plugins: every Plugin
	// that runs a demo image runs as a local process of that plugin
	// (nbp-fx, webdav-csv) built from this tree, with its granted Secrets
	// as files, which the core calls; and, unless ProxyResolver is set, the
	// egress proxy sends api.nbp.pl and FakeDAVHost to loopback stand-ins
	// (FakeNBP, FakeDAV), since the demo has no internet. `openfief dev
	// --local-plugins` and `make demo` set it.
	LocalPlugins bool
	// InCluster, with a real node, runs the platform itself as pods of the
	// node instead of in this process: the operator, egress-proxy and
	// openfief-core images built from this tree, installed by `openfief
	// platform install` from a release overlay, with the cluster DNS and a
	// volume for the core's data (incluster.go). `openfief dev --in-cluster`
	// sets it.
	InCluster bool
	// DisableIsolationGate runs plugin pods without the isolation gate
	// (OF-42), which shows the window the gate closes: only tests set it.
	// In the in-cluster mode the installed operator is told so too.
	DisableIsolationGate bool
	// IsolationGateDeadline, when set, is how long the isolation gate waits
	// for isolation before it fails the pod (the operator's
	// --isolation-gate-deadline; its default is a minute). Tests that stop
	// the node's NetworkPolicy controller set it short, so a start that
	// never isolates fails in seconds.
	IsolationGateDeadline time.Duration
	// RegistryRetry, when set, is how soon the operator checks again an
	// image whose registry could not be read (the operator's
	// --registry-retry; its default is a minute). Tests that stop a
	// registry set it short, so what waited runs seconds after it is back.
	RegistryRetry time.Duration
	// BeforeInstall, in the in-cluster mode, runs once the node, the NBP
	// stand-in, the registries, the namespace and the owner's signers are
	// in place, just before the install; what it returns is added to the
	// overlay installed (a test's private registry, for example).
	BeforeInstall func(ctx context.Context, s *Stack) (DevOverlay, error)
}

// Stack is a running local platform.
type Stack struct {
	// Cluster is the control plane; Cluster.Config is an admin identity.
	Cluster *devcluster.Cluster
	// KubeconfigPath is an admin kubeconfig for the CLI and other tools.
	KubeconfigPath string
	// RegistryHost is the loopback registry's host:port; in the in-cluster
	// mode the registry's name on the node's bridge, and RegistryLoopback
	// the same registry on loopback, where this process pushes. Plugins
	// name images by RegistryHost; PushRegistry is where to push them.
	RegistryHost     string
	RegistryLoopback string
	// SignersFile is a copy of the signers.json of the ConfigMap
	// openfief-trusted-signers, which the operator follows and the stack
	// creates trusting the local owner key; the stack rewrites the copy on
	// every change of the ConfigMap (mirrorSigners), for `openfief plugin
	// verify --signers`, which reads no cluster.
	SignersFile string
	// Images are the demo images by name (see DemoImages).
	Images map[string]plugins.ImageRef
	// ProxyAddress is the egress proxy's loopback host:port (with a real
	// node, its address on the node's bridge), and ProxyMetricsAddress the
	// loopback host:port of its /healthz, /readyz and /metrics.
	ProxyAddress        string
	ProxyMetricsAddress string
	// Core is openfief-core, running in this process; CoreURL is its owner
	// API (http://127.0.0.1:port), which the CLI reaches directly in the
	// local mode (OPENFIEF_CORE_URL, docs/core.md), with a token of the
	// owner's ServiceAccount like everyone (OF-18).
	Core    *core.Core
	CoreURL string
	// FakeNBP is the loopback NBP stand-in Options.LocalPlugins starts.
	FakeNBP *FakeNBP
	// FakeDAV stands in for the owner's WebDAV server, for the view,
	// serving the directory webdav of Options.Dir: on loopback
	// (127.0.0.2) with Options.LocalPlugins, in the in-cluster mode at a
	// StandIn address of the node for FakeDAVHost.
	FakeDAV *FakeDAV
	// EnvFile holds shell exports of the above, for scripts.
	EnvFile string
	// PlatformImages are the platform's images by name, PlatformVersion
	// their version, ReleaseDir the release overlay pinning them and
	// OverlayDir the overlay installed on top of it: in the in-cluster
	// mode only.
	PlatformImages  map[string]plugins.ImageRef
	PlatformSource  images.Source // the tree they were built from
	PlatformVersion string
	ReleaseDir      string
	OverlayDir      string
	// InstallLog holds what `openfief platform install` printed.
	InstallLog string

	signer *ocisign.KeySigner
	// gateImage is the check probe on the loopback registry, which the
	// in-process operator runs as the isolation gate (OF-42): with a real
	// node only.
	gateImage string
	// checkProbe is the check probe image (OF-29) on the bridge registry,
	// signed by signer, and checkProbeIndex its build: in the in-cluster
	// mode only.
	checkProbe      plugins.ImageRef
	checkProbeIndex v1.ImageIndex
	// admin is a client of Cluster.Config, for the steps that install.
	admin kubernetes.Interface
	// local runs the demo plugins as local processes (LocalPlugins).
	local *localPlugins
	// bridgeRegistry serves the in-cluster mode's plugin images, and can be
	// stopped for a test of an outage (StopRegistry).
	bridgeRegistry *switchableServer

	stops []func()
}

// Namespace objects the stack creates besides the CRDs.
const (
	// CoreServiceAccount is the core's identity. The core runs in this
	// process; its Service exists for the operator, which reads the core's
	// address and pod port from it.
	CoreServiceAccount = "openfief-core"
	coreSelectorValue  = "openfief-core"
	proxySelectorValue = "openfief-egress-proxy"
	proxyPodPort       = 3128
	corePodPort        = 8080
)

// Start brings the platform up, step by step (Stack.startPlan lists them), and
// returns when every part serves. On error everything started so far is
// stopped.
func Start(ctx context.Context, opts Options) (s *Stack, err error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: Options.Dir is required")
	}
	if opts.InCluster && (opts.Node != devcluster.NodeReal || opts.LocalPlugins) {
		return nil, errors.New("devstack: InCluster needs a real node, and runs plugins as pods (no LocalPlugins)")
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	s = &Stack{Images: map[string]plugins.ImageRef{}}
	started := s // the returns below set s to nil
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	plan := s.startPlan(opts)
	p := progress{w: opts.Progress, total: len(plan)}
	for _, st := range plan {
		if err := p.step(st.what, func() error { return st.run(ctx, &opts) }); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Stop stops everything in the reverse order of starting.
func (s *Stack) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// installNamespace applies the namespace from deploy/crds and the Services
// and ServiceAccount the operator and the suite expect of the core and the
// proxy. The core and proxy pods are not run in the cluster: both run in
// this process.
func (s *Stack) installNamespace(ctx context.Context, client kubernetes.Interface) error {
	var ns corev1.Namespace
	if err := yaml.UnmarshalStrict(deploy.Namespace(), &ns); err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	services := []*corev1.Service{
		service(operator.DefaultCoreService, operator.DefaultCorePort, 8080, corePodPort, coreSelectorValue),
		service(operator.DefaultProxyService, operator.DefaultProxyPort, 3128, proxyPodPort, proxySelectorValue),
	}
	for _, svc := range services {
		if _, err := client.CoreV1().Services(plugins.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: CoreServiceAccount, Namespace: plugins.Namespace}, AutomountServiceAccountToken: ptr.To(false)}
	if _, err := client.CoreV1().ServiceAccounts(plugins.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func service(name, portName string, port, podPort int32, selector string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": selector},
			Ports:    []corev1.ServicePort{{Name: portName, Port: port, TargetPort: intstr.FromInt32(podPort), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// startRegistry serves an in-memory OCI registry (with the Referrers API) on
// loopback, pushes the demo images (the real nbp-fx image index, see
// demoIndexes, each with the CA of cas[its plugin] added when there is
// one) and signs them with the owner key.
func (s *Stack) startRegistry(ctx context.Context, signer *ocisign.KeySigner, progress io.Writer, realNode bool, cas map[string][]byte) error {
	demo, err := demoIndexes(ctx, progress, realNode)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.WithReferrersSupport(true), registry.Logger(discardLog())),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	s.stops = append(s.stops, func() { _ = srv.Close() })
	s.RegistryHost = ln.Addr().String()

	if probe, ok := demo[overlay.CheckProbe]; ok {
		// The platform's own image, pinned by digest like the release pins
		// it; the operator runs it, unverified, as the isolation gate.
		ref, err := images.PushIndex(ctx, images.Repository(s.RegistryHost, overlay.CheckProbe), probe, images.PushOptions{})
		if err != nil {
			return err
		}
		s.gateImage = ref.String()
	}
	for _, d := range DemoImages() {
		idx := demo[d.Name]
		if ca, ok := cas[d.Plugin]; ok {
			if idx, err = images.WithExtraCA(idx, standInCAName, ca); err != nil {
				return err
			}
		}
		ref, err := images.PushIndex(ctx, s.RegistryHost+"/"+d.Repository, idx, images.PushOptions{})
		if err != nil {
			return err
		}
		if err := signer.Sign(ctx, ref); err != nil {
			return err
		}
		s.Images[d.Name] = ref
	}
	return nil
}

// PublishImage pushes a plugin image with manifest m to the stack's registry
// and signs it with the owner key the operator trusts. In the in-cluster
// mode it pushes through the registry's loopback address and returns the
// image by its name on the node's bridge (RegistryHost), as the Plugins
// name it.
func (s *Stack) PublishImage(ctx context.Context, repo string, m plugins.Manifest, files map[string][]byte) (plugins.ImageRef, error) {
	img, err := ocisign.PluginImage(m, files)
	if err != nil {
		return plugins.ImageRef{}, err
	}
	return s.PublishBuiltImage(ctx, repo, img)
}

// PublishBuiltImage pushes img, a plugin image built elsewhere (its
// manifest label already set), and signs it as PublishImage does.
func (s *Stack) PublishBuiltImage(ctx context.Context, repo string, img v1.Image) (plugins.ImageRef, error) {
	ref, err := ocisign.Push(ctx, s.PushRegistry(), repo, img)
	if err != nil {
		return plugins.ImageRef{}, err
	}
	if err := s.signer.Sign(ctx, ref); err != nil {
		return plugins.ImageRef{}, err
	}
	return plugins.ParseImageRef(s.RegistryHost + "/" + repo + "@" + ref.Digest())
}

// PushRegistry is the stack registry's address on this machine, where
// images are pushed and signed: RegistryHost, or in the in-cluster mode
// RegistryLoopback. An image pushed there is named, in a Plugin, under
// RegistryHost with the same repository and digest.
func (s *Stack) PushRegistry() string {
	if s.RegistryLoopback != "" {
		return s.RegistryLoopback
	}
	return s.RegistryHost
}

// startOperator runs the operator in this process as the binary builds it
// (operator.Options, ManagerOptions, AddToManager), as OperatorUser when
// opts.RunAsServiceAccounts. Like an installed operator it follows the
// owner's signers in the ConfigMap openfief-trusted-signers live (OF-31),
// which holds the local owner key when it starts: an owner's edit there
// applies at once, as on a cluster. It serves no metrics or probes and
// elects no leader.
func (s *Stack) startOperator(opts Options) error {
	scheme, err := apiconv.NewScheme()
	if err != nil {
		return err
	}
	o := operator.DefaultOptions()
	o.Cluster.Gate.Image, o.Cluster.Gate.Disabled = s.gateImage, opts.DisableIsolationGate
	if s.gateImage == "" {
		// kwok runs no container: a name that is never pulled.
		o.Cluster.Gate.Image = unpulledGateImage
	} else {
		targets, err := plugins.ParseGateTargets(s.gateTargets().String())
		if err != nil {
			return err
		}
		o.Cluster.Gate.Settings.Targets = targets
	}
	if opts.IsolationGateDeadline > 0 {
		o.Cluster.Gate.Settings.Deadline = opts.IsolationGateDeadline
	}
	if opts.RegistryRetry > 0 {
		o.RegistryRetry = opts.RegistryRetry
	}
	o.Cluster.CoreSubject = CoreSubject
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.LeaderElection = "0", "", false
	mopts := o.ManagerOptions(scheme)
	mopts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mopts.Logger = logrLogger(opts.Logs)
	mgr, err := ctrl.NewManager(s.clientConfig(opts, OperatorUser), mopts)
	if err != nil {
		return err
	}
	if _, err := operator.AddToManager(mgr, o); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			mopts.Logger.Error(err, "operator stopped")
		}
	}()
	s.stops = append(s.stops, func() { cancel(); <-done })
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("operator caches did not sync")
	}
	return nil
}

// startProxy runs the egress proxy in this process as the binary runs it
// (proxyserver.Start, with the binary's defaults: the review cache, the
// metrics, the tunnel and pending-connection limits), as ProxyUser when
// opts.RunAsServiceAccounts (client is the proxy's own). It serves CONNECT
// on proxyListenAddress and its ops endpoints (/healthz, /readyz, /metrics)
// on a free loopback port, and differs from an install only in the stand-ins
// opts may set and in a shorter shutdown grace.
func (s *Stack) startProxy(client kubernetes.Interface, opts Options) error {
	o := proxyserver.DefaultOptions()
	o.Client = client
	o.Listen, o.MetricsListen = s.proxyListenAddress(opts), "127.0.0.1:0"
	o.ShutdownGrace = proxyShutdownGrace
	o.Log = slog.New(slog.NewTextHandler(orDiscard(opts.Logs), nil))
	o.Resolver, o.Dialer, o.UnsafeAllowPrefixes = opts.ProxyResolver, opts.ProxyDialer, opts.UnsafeAllowPrefixes
	srv, err := proxyserver.Start(context.Background(), o)
	if err != nil {
		return err
	}
	s.ProxyAddress, s.ProxyMetricsAddress = srv.Addr(), srv.MetricsAddr()
	s.stops = append(s.stops, func() {
		if err := srv.Stop(); err != nil {
			o.Log.Error("egress proxy stopped", "error", err)
		}
	})
	return nil
}

// startCore runs openfief-core in this process as the binary does
// (core.Start), as CoreUser when opts.RunAsServiceAccounts, with its SQLite
// database in the state directory and both APIs on loopback.
func (s *Stack) startCore(ctx context.Context, opts Options) error {
	log := slog.New(slog.NewTextHandler(orDiscard(opts.Logs), nil))
	o := core.DefaultOptions()
	o.DSN = filepath.Join(opts.Dir, "core.db")
	o.PluginAddr, o.OwnerAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.Resolve = opts.CoreResolve
	o.Scheduler = opts.CoreScheduler
	o.Log = log
	c, err := core.Start(context.WithoutCancel(ctx), s.clientConfig(opts, CoreUser), o)
	if err != nil {
		return err
	}
	s.Core, s.CoreURL = c, "http://"+c.OwnerAddr()
	s.stops = append(s.stops, c.Stop)
	return nil
}

// proxyShutdownGrace is how long the dev proxy's tunnels may continue when
// the stack stops.
const proxyShutdownGrace = 5 * time.Second

// writeEnv writes shell exports naming everything a script or person needs.
func (s *Stack) writeEnv(dir string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "export KUBECONFIG=%q\n", s.KubeconfigPath)
	fmt.Fprintf(&b, "export OPENFIEF_SIGNERS=%q\n", s.SignersFile)
	fmt.Fprintf(&b, "export OPENFIEF_REGISTRY=%q\n", s.RegistryHost)
	fmt.Fprintf(&b, "export %s=%q\n", EnvRegistryPush, s.PushRegistry())
	if s.PlatformImages != nil {
		// In-cluster, the CLI reaches the core through the API server and
		// reads the plugin registry on the node's bridge over plain HTTP.
		fmt.Fprintf(&b, "export %s=%q\n", cli.EnvInsecureRegistries, s.RegistryHost)
	} else {
		fmt.Fprintf(&b, "export OPENFIEF_EGRESS_PROXY=%q\n", s.ProxyAddress)
		fmt.Fprintf(&b, "export OPENFIEF_CORE_URL=%q\n", s.CoreURL)
	}
	for _, d := range DemoImages() {
		fmt.Fprintf(&b, "export %s=%q\n", d.EnvVar, s.Images[d.Name].String())
	}
	if s.FakeDAV != nil {
		// The owner's side of the WebDAV stand-in: the folder's URL for the
		// view's config, its host to approve, the directory of this machine
		// it serves, and the credentials as files for the Secret.
		creds := filepath.Join(dir, "webdav-credentials")
		if err := s.FakeDAV.WriteCredentials(creds); err != nil {
			return err
		}
		fmt.Fprintf(&b, "export %s=%q\n", EnvDemoDAVURL, s.FakeDAV.FolderURL())
		fmt.Fprintf(&b, "export %s=%q\n", EnvDemoDAVHost, FakeDAVHost)
		fmt.Fprintf(&b, "export %s=%q\n", EnvDemoDAVDir, s.FakeDAV.Dir())
		fmt.Fprintf(&b, "export %s=%q\n", EnvDemoDAVCredentials, creds)
	}
	s.EnvFile = filepath.Join(dir, "env")
	return os.WriteFile(s.EnvFile, []byte(b.String()), 0o600)
}

// EnvRegistryPush names, in the env file, where to push and sign an image
// for the stack's registry (PushRegistry); OPENFIEF_REGISTRY is the
// registry's name in a Plugin's image, which the node pulls. Both are the
// same address but in the in-cluster mode.
const EnvRegistryPush = "OPENFIEF_REGISTRY_PUSH"

// The env file's names for the WebDAV stand-in (writeEnv).
const (
	// EnvDemoDAVURL is the stand-in's folder, as webdav-csv's config url.
	EnvDemoDAVURL = "OPENFIEF_DEMO_DAV_URL"
	// EnvDemoDAVHost is its host, to approve with --host.
	EnvDemoDAVHost = "OPENFIEF_DEMO_DAV_HOST"
	// EnvDemoDAVDir is the directory of this machine the folder is.
	EnvDemoDAVDir = "OPENFIEF_DEMO_DAV_DIR"
	// EnvDemoDAVCredentials is a directory (0700) with the files username
	// and password (0600), for the webdav-credentials Secret.
	EnvDemoDAVCredentials = "OPENFIEF_DEMO_DAV_CREDENTIALS"
)

// progress prints numbered steps with their duration.
type progress struct {
	w     io.Writer
	n     int
	total int
}

func (p *progress) step(what string, fn func() error) error {
	p.n++
	start := time.Now()
	if p.w != nil {
		fmt.Fprintf(p.w, "[%d/%d] %s...\n", p.n, p.total, what)
	}
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if p.w != nil {
		fmt.Fprintf(p.w, "      done in %s\n", time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// CoreSubject is the core's username, which plugins accept calls from (D-59).
const CoreSubject = "system:serviceaccount:" + plugins.Namespace + ":" + CoreServiceAccount

// unpulledGateImage is the isolation gate image the operator is given where
// kwok plays the pods: digest-pinned, in the reserved .invalid domain, never
// pulled (OF-42).
const unpulledGateImage = "unpulled.invalid/openfief/check-probe@sha256:0000000000000000000000000000000000000000000000000000000000000000"
