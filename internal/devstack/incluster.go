package devstack

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/release/overlay"
)

// The in-cluster mode (Options.InCluster): the operator, the egress proxy
// and openfief-core run as pods of the real node, from images built from
// this tree, installed by `openfief platform install` from a release
// overlay as a user installs them (docs/operator.md); the cluster DNS
// (CoreDNS) runs as a pod too, and the core's data lives on a
// PersistentVolume of the node.

// PlatformImages are the images the in-cluster mode builds and installs.
var PlatformImages = []string{"operator", "egress-proxy", "openfief-core"}

// CheckProbeRepository is where the in-cluster mode serves the check probe
// image (OF-29) on its bridge registry, beside the demo plugin.
const CheckProbeRepository = "plugins/" + overlay.CheckProbe

// InClusterSyncInterval is how often the in-cluster core syncs each
// connector: the dev overlay sets it (deploy/core syncs hourly), so the
// demo shows syncs follow one another.
const InClusterSyncInterval = time.Minute

// standInCAName names the stand-in's CA file in the demo images: the NBP
// stand-in's in nbp-fx, the WebDAV stand-in's in webdav-csv.
const standInCAName = "openfief-dev-stand-in"

// inClusterPlan lists Start's steps in the in-cluster mode.
func (s *Stack) inClusterPlan(opts Options) []startStep {
	return []startStep{
		{"starting the control plane (etcd, kube-apiserver, controller-manager, scheduler), a real node (containerd, kubelet, kube-proxy, kube-router), the cluster DNS (CoreDNS) and a volume for the core's data", s.startControlPlane},
		{"standing in for api.nbp.pl and the owner's WebDAV server (" + FakeDAVHost + ") on the node (the demo needs no internet): HTTPS servers of its own, which the cluster DNS resolves the names to", s.startStandIns},
		{"building the operator, egress-proxy and openfief-core images (or reusing .cache/images) and pushing them to the node's registry", s.pushPlatformImages},
		{"serving the demo images (nbp-fx, trusting the stand-in's CA) and the check probe, signed, from a registry on the node's bridge; its key in openfief-trusted-signers", s.startBridgeRegistry},
		{"installing the platform: openfief platform install from a release overlay of those images", s.installPlatform},
		{"writing " + filepath.Join(opts.Dir, "env"), func(_ context.Context, opts *Options) error { return s.writeEnv(opts.Dir) }},
	}
}

// startStandIns serves the NBP stand-in and the WebDAV stand-in, each at
// an address the node hands out for its name (devcluster's StandIn), on
// port 443.
func (s *Stack) startStandIns(_ context.Context, opts *Options) error {
	addr, err := s.Cluster.StandIn(fakeNBPHost)
	if err != nil {
		return err
	}
	nbp, err := StartFakeNBP(net.JoinHostPort(addr.String(), "443"))
	if err != nil {
		return err
	}
	s.stops = append(s.stops, nbp.Close)
	s.FakeNBP = nbp
	if addr, err = s.Cluster.StandIn(FakeDAVHost); err != nil {
		return err
	}
	dav, err := StartFakeDAV(net.JoinHostPort(addr.String(), "443"), filepath.Join(opts.Dir, "webdav"))
	if err != nil {
		return err
	}
	s.stops = append(s.stops, dav.Close)
	s.FakeDAV = dav
	return nil
}

// pushPlatformImages builds the platform's images for this machine (or
// reuses the tree's cached build) and pushes them to the node's registry,
// from which the kubelet pulls.
func (s *Stack) pushPlatformImages(ctx context.Context, opts *Options) error {
	root, err := sourceRoot()
	if err != nil {
		return err
	}
	src, err := images.ReadSource(ctx, root)
	if err != nil {
		return err
	}
	// The demo plugins and the check probe too, built once with the others:
	// the cache entry then holds all six, which the demo images and the
	// probe reuse (a narrower build would not replace a cached one, and
	// would be built again each start).
	specs, err := images.SelectSpecs(append(append(slices.Clone(PlatformImages), demoPlugins()...), overlay.CheckProbe)...)
	if err != nil {
		return err
	}
	res, reused, err := images.Cached(ctx, images.CacheDir(root), images.Options{Source: src, Specs: specs, Platforms: []v1.Platform{images.HostPlatform()}})
	if err != nil {
		return fmt.Errorf("build the platform's images: %w", err)
	}
	if opts.Progress != nil {
		how := "built"
		if reused {
			how = "reused from " + images.CacheDir(root)
		}
		fmt.Fprintf(opts.Progress, "      %s the platform's images of %s\n", how, src.Version)
	}
	s.PlatformSource, s.PlatformVersion = src, src.Tag()
	s.PlatformImages = map[string]plugins.ImageRef{}
	for _, b := range res.Images {
		if b.Spec.Name == overlay.CheckProbe {
			s.checkProbeIndex = b.Index // served with the plugins
		}
		if !slices.Contains(PlatformImages, b.Spec.Name) {
			continue
		}
		ref, err := images.PushIndex(ctx, images.Repository(s.Cluster.NodeRegistry(), b.Spec.Name), b.Index, images.PushOptions{})
		if err != nil {
			return err
		}
		s.PlatformImages[b.Spec.Name] = ref
	}
	if s.checkProbeIndex == nil {
		return fmt.Errorf("the build holds no %s image", overlay.CheckProbe)
	}
	return nil
}

// startBridgeRegistry serves a registry for plugin images on one port of
// both loopback (where this process pushes and signs) and the node's bridge
// address (its name in the Plugins, which the operator's pod reads and the
// kubelet pulls, over plain HTTP: the node trusts it, the operator is told
// by the dev overlay, the CLI by OPENFIEF_INSECURE_REGISTRIES). It pushes
// the demo images there, nbp-fx trusting the NBP stand-in's CA and
// webdav-csv the WebDAV stand-in's, and the
// check probe (OF-29: a plugin image, which the operator verifies and the
// kubelet pulls like any), all signed by a fresh owner key, and publishes
// the key in openfief-trusted-signers, which the operator reads when it
// starts.
func (s *Stack) startBridgeRegistry(ctx context.Context, opts *Options) error {
	demo, err := demoIndexes(ctx, opts.Progress, false)
	if err != nil {
		return err
	}
	lb, br, err := ListenBoth(s.Cluster.NodeGateway().String())
	if err != nil {
		return err
	}
	s.bridgeRegistry = serveSwitchable(registry.New(registry.WithReferrersSupport(true), registry.Logger(discardLog())), lb, br)
	s.stops = append(s.stops, s.bridgeRegistry.stop)
	s.RegistryHost, s.RegistryLoopback = br.Addr().String(), lb.Addr().String()
	if err := s.Cluster.TrustRegistry(s.RegistryHost); err != nil {
		return err
	}
	if s.signer, err = ocisign.NewKeySigner(); err != nil {
		return err
	}
	for _, d := range DemoImages() {
		ca := s.FakeNBP.CAPEM()
		if d.Plugin == DemoView {
			ca = s.FakeDAV.CAPEM()
		}
		idx, err := images.WithExtraCA(demo[d.Name], standInCAName, ca)
		if err != nil {
			return err
		}
		if s.Images[d.Name], err = s.pushSigned(ctx, d.Repository, idx); err != nil {
			return err
		}
	}
	if s.checkProbe, err = s.pushSigned(ctx, CheckProbeRepository, s.checkProbeIndex); err != nil {
		return fmt.Errorf("the check probe: %w", err)
	}
	// The namespace first: the install applies it again as its own.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plugins.Namespace}}
	if _, err := s.admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return s.publishOwnerKey(ctx, *opts)
}

// pushSigned pushes idx to the bridge registry's repository through its
// loopback address, signs it with the owner key, and returns its name on
// the bridge, by digest, as a Plugin names it.
func (s *Stack) pushSigned(ctx context.Context, repository string, idx v1.ImageIndex) (plugins.ImageRef, error) {
	local, err := images.PushIndex(ctx, s.RegistryLoopback+"/"+repository, idx, images.PushOptions{})
	if err != nil {
		return plugins.ImageRef{}, err
	}
	if err := s.signer.Sign(ctx, local); err != nil {
		return plugins.ImageRef{}, err
	}
	return plugins.ParseImageRef(s.RegistryHost + "/" + repository + "@" + local.Digest())
}

// CheckProbeImage is the check probe image (OF-29) the in-cluster mode
// serves on its bridge registry, signed by the owner key the operator
// trusts, and names in the release's ConfigMap openfief-release; the zero
// ImageRef in the other modes.
func (s *Stack) CheckProbeImage() plugins.ImageRef { return s.checkProbe }

// ListenBoth listens on one TCP port of both 127.0.0.1 and host (a real
// node's bridge address), for a server the machine and the pods reach.
func ListenBoth(host string) (lb, br net.Listener, err error) {
	for range 10 {
		if br, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return nil, nil, err
		}
		port := strconv.Itoa(br.Addr().(*net.TCPAddr).Port)
		if lb, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", port)); err == nil {
			return lb, br, nil
		}
		_ = br.Close()
	}
	return nil, nil, fmt.Errorf("no port free on both 127.0.0.1 and %s: %w", host, err)
}

// installPlatform writes the release overlay of the pushed images (the
// check probe's named in openfief-release) and the
// dev overlay on top of it (the operator reads the bridge registry over
// plain HTTP; the core syncs every InClusterSyncInterval, or
// Options.CoreScheduler.DefaultInterval; what Options.BeforeInstall adds),
// and runs `openfief platform install` on it in this process, as a user
// would.
func (s *Stack) installPlatform(ctx context.Context, opts *Options) error {
	root, err := sourceRoot()
	if err != nil {
		return err
	}
	s.ReleaseDir = filepath.Join(opts.Dir, "release")
	refs := maps.Clone(s.PlatformImages)
	refs[overlay.CheckProbe] = s.checkProbe
	if err := overlay.WritePlatform(s.ReleaseDir, filepath.Join(root, "deploy"), overlay.Platform{
		Refs: refs, Version: s.PlatformVersion,
		Header: "openfief dev --in-cluster: this tree's images on the node's registry.",
	}); err != nil {
		return err
	}
	o := DevOverlay{InsecureRegistries: []string{s.RegistryHost}, SyncInterval: InClusterSyncInterval}
	if opts.DisableIsolationGate {
		o.OperatorArgs = append(o.OperatorArgs, "--isolation-gate=false")
	} else {
		o.OperatorArgs = append(o.OperatorArgs, "--isolation-gate-targets="+s.gateTargets().String())
		if opts.IsolationGateDeadline > 0 {
			o.OperatorArgs = append(o.OperatorArgs, "--isolation-gate-deadline="+opts.IsolationGateDeadline.String())
		}
	}
	if opts.RegistryRetry > 0 {
		o.OperatorArgs = append(o.OperatorArgs, "--registry-retry="+opts.RegistryRetry.String())
	}
	if opts.CoreScheduler.DefaultInterval > 0 {
		o.SyncInterval = opts.CoreScheduler.DefaultInterval
	}
	if opts.BeforeInstall != nil {
		add, err := opts.BeforeInstall(ctx, s)
		if err != nil {
			return err
		}
		o.Components = append(o.Components, add.Components...)
		o.InsecureRegistries = append(o.InsecureRegistries, add.InsecureRegistries...)
	}
	s.OverlayDir = filepath.Join(opts.Dir, "overlay")
	if err := WriteDevOverlay(s.OverlayDir, "../release", o); err != nil {
		return err
	}
	s.InstallLog = filepath.Join(opts.Dir, "install.log")
	f, err := os.Create(s.InstallLog)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // a write error shows in the log's reader
	var out io.Writer = f
	if opts.Logs != nil {
		out = io.MultiWriter(f, opts.Logs)
	}
	code := cli.Main(ctx, []string{"--kubeconfig", s.KubeconfigPath, "platform", "install", "--overlay", s.OverlayDir, "--timeout", "5m"},
		cli.Streams{In: strings.NewReader(""), Out: out, ErrOut: out})
	if code != cli.ExitOK {
		return fmt.Errorf("openfief platform install --overlay %s exited %d; its output is in %s", s.OverlayDir, code, s.InstallLog)
	}
	return nil
}

// DevOverlay is what the in-cluster mode's overlay adds to the release:
// the admin's own layer, as docs/operator.md describes it.
type DevOverlay struct {
	// Components are kustomize components (paths) to add, such as
	// deploy/operator/components/registry-config.
	Components []string
	// InsecureRegistries are registries the operator reads over plain HTTP.
	InsecureRegistries []string
	// SyncInterval, if not zero, is how often the core syncs each connector
	// (a later --sync-interval wins over deploy/core's).
	SyncInterval time.Duration
	// OperatorArgs are added to the operator's arguments (the isolation
	// gate's targets, OF-42).
	OperatorArgs []string
}

// WriteDevOverlay writes dir/kustomization.yaml: the release overlay at
// release (a path relative to dir) with what o adds.
func WriteDevOverlay(dir, release string, o DevOverlay) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# The admin's own overlay on top of the release (openfief dev --in-cluster).\n")
	fmt.Fprintf(&b, "resources:\n  - %s\n", release)
	if len(o.Components) > 0 {
		b.WriteString("components:\n")
		for _, c := range o.Components {
			if filepath.IsAbs(c) {
				rel, err := filepath.Rel(dir, c)
				if err != nil {
					return err
				}
				c = rel
			}
			fmt.Fprintf(&b, "  - %s\n", c)
		}
	}
	var patches strings.Builder
	var operatorArgs []string
	for _, host := range o.InsecureRegistries {
		operatorArgs = append(operatorArgs, "--insecure-registry="+host)
	}
	operatorArgs = append(operatorArgs, o.OperatorArgs...)
	if len(operatorArgs) > 0 {
		patches.WriteString("  - target: {kind: Deployment, name: openfief-operator}\n    patch: |-\n")
		for _, arg := range operatorArgs {
			fmt.Fprintf(&patches, "      - {op: add, path: /spec/template/spec/containers/0/args/-, value: %q}\n", arg)
		}
	}
	if o.SyncInterval > 0 {
		patches.WriteString("  - target: {kind: Deployment, name: openfief-core}\n    patch: |-\n")
		fmt.Fprintf(&patches, "      - {op: add, path: /spec/template/spec/containers/0/args/-, value: \"--sync-interval=%s\"}\n", o.SyncInterval)
	}
	if patches.Len() > 0 {
		b.WriteString("patches:\n" + patches.String())
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644)
}

// Signer is the owner key the stack signs its images with, which the
// operator trusts.
func (s *Stack) Signer() *ocisign.KeySigner { return s.signer }
