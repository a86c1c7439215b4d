package devstack

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/ocisign"
)

// startStep is one step of Start: what it prints and what it does. A step
// may fill in opts for the steps after it (the egress proxy's stand-in
// resolver, the core's resolver).
type startStep struct {
	what string
	run  func(ctx context.Context, opts *Options) error
}

// startPlan lists Start's steps of s for opts, in order, leaving out those
// opts does not ask for: the real node's proxy address and stand-ins (Node;
// the stand-ins unless LocalPlugins or ProxyResolver brings its own), the
// components' identities (RunAsServiceAccounts) and the local plugin
// processes (LocalPlugins).
func (s *Stack) startPlan(opts Options) []startStep {
	if opts.InCluster {
		return s.inClusterPlan(opts)
	}
	plan := []startStep{
		{controlPlaneWhat(opts.Node), s.startControlPlane},
		{"creating the openfief namespace (restricted), the core's and proxy's Services and the owner's ServiceAccount", s.installBasics},
	}
	if opts.Node == devcluster.NodeReal {
		plan = append(plan, startStep{"pointing the egress proxy's Service at the node's bridge address, and letting plugin pods reach it there",
			func(ctx context.Context, _ *Options) error { return s.installProxyOnNode(ctx, s.admin) }})
		if !opts.LocalPlugins && opts.ProxyResolver == nil {
			plan = append(plan, startStep{"standing in for api.nbp.pl and the owner's WebDAV server (" + FakeDAVHost + ") on the node (the demo needs no internet): HTTPS servers of its own, which the egress proxy resolves the names to", s.startNodeStandIns})
		}
	}
	if opts.RunAsServiceAccounts {
		plan = append(plan, startStep{"applying the ServiceAccounts and RBAC of deploy/operator, deploy/egress-proxy and deploy/core, to run each as those",
			func(ctx context.Context, _ *Options) error { return s.installIdentities(ctx) }})
	}
	plan = append(plan,
		startStep{"building the nbp-fx and webdav-csv plugin images (or reusing .cache/images) and serving them, signed, from a loopback registry; its key in openfief-trusted-signers", s.startSignedRegistry},
		startStep{"starting the operator", func(_ context.Context, opts *Options) error { return s.startOperator(*opts) }},
		startStep{proxyWhat(opts), s.startEgressProxy},
	)
	if opts.LocalPlugins {
		plan = append(plan, startStep{"building nbp-fx and webdav-csv to run demo plugins as local processes (kwok runs no container)", s.startLocalPluginProcesses})
	}
	return append(plan,
		startStep{"starting openfief-core (SQLite in " + filepath.Join(opts.Dir, "core.db") + ")", s.startCoreStep},
		startStep{"writing " + filepath.Join(opts.Dir, "env"), func(_ context.Context, opts *Options) error { return s.writeEnv(opts.Dir) }},
	)
}

// proxyWhat names the proxy's step, which starts the loopback stand-ins too
// when opts asks for local plugins and brings no resolver.
func proxyWhat(opts Options) string {
	if opts.LocalPlugins && opts.ProxyResolver == nil {
		return "starting the egress proxy, with loopback stand-ins for api.nbp.pl and the owner's WebDAV server (" + FakeDAVHost + ")"
	}
	return "starting the egress proxy"
}

// controlPlaneWhat names the first step, which differs with the node kind.
func controlPlaneWhat(node devcluster.NodeKind) string {
	if node == devcluster.NodeReal {
		return "starting the control plane (etcd, kube-apiserver, controller-manager, scheduler) and a real node (containerd, kubelet, kube-proxy, kube-router)"
	}
	return "starting the control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)"
}

// startControlPlane writes the CRDs of this tree, starts the full local
// control plane with them (and the real node when opts.Node asks; in the
// in-cluster mode with the cluster DNS and a volume, and no CRDs, which the
// install applies), and copies its admin kubeconfig into opts.Dir.
func (s *Stack) startControlPlane(ctx context.Context, opts *Options) error {
	copts := devcluster.Options{
		Mode: devcluster.Full, Nodes: opts.Nodes, BinDir: opts.BinDir, Node: opts.Node,
		Output: opts.Logs, StartTimeout: startTimeout(opts.Node),
	}
	if opts.InCluster {
		// The install applies the CRDs; the core's claim binds the volume.
		copts.ClusterDNS, copts.Volumes = true, 1
	} else {
		crdDir := filepath.Join(opts.Dir, "crds")
		if err := os.MkdirAll(crdDir, 0o700); err != nil {
			return err
		}
		if err := deploy.WriteCRDs(crdDir); err != nil {
			return err
		}
		copts.CRDDirectoryPaths = []string{crdDir}
	}
	c, err := devcluster.Start(ctx, copts)
	if err != nil {
		return err
	}
	s.Cluster = c
	s.stops = append(s.stops, func() { _ = c.Stop() })
	if s.admin, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	s.KubeconfigPath = filepath.Join(opts.Dir, "kubeconfig")
	raw, err := os.ReadFile(c.KubeconfigPath)
	if err != nil {
		return err
	}
	return os.WriteFile(s.KubeconfigPath, raw, 0o600)
}

// installBasics creates the namespace, the core's and the proxy's Services
// and the core's ServiceAccount (installNamespace), and the owner's
// ServiceAccount and Role (installOwner).
func (s *Stack) installBasics(ctx context.Context, _ *Options) error {
	if err := s.installNamespace(ctx, s.admin); err != nil {
		return err
	}
	return s.installOwner(ctx)
}

// startSignedRegistry makes the local owner key, serves the demo images
// signed with it from a loopback registry (which a real node is told to
// trust over plain HTTP; the demo images then trust the CAs of the
// stand-ins on the node, when they run), publishes the key in the cluster's
// openfief-trusted-signers and mirrors that ConfigMap into signers.json.
func (s *Stack) startSignedRegistry(ctx context.Context, opts *Options) error {
	signer, err := ocisign.NewKeySigner()
	if err != nil {
		return err
	}
	s.signer = signer
	cas := map[string][]byte{}
	if s.FakeNBP != nil {
		cas[DemoPlugin] = s.FakeNBP.CAPEM()
	}
	if s.FakeDAV != nil {
		cas[DemoView] = s.FakeDAV.CAPEM()
	}
	if err := s.startRegistry(ctx, signer, opts.Progress, opts.Node == devcluster.NodeReal, cas); err != nil {
		return err
	}
	if opts.Node == devcluster.NodeReal {
		// The node pulls the plugin images from it over plain HTTP.
		if err := s.Cluster.TrustRegistry(s.RegistryHost); err != nil {
			return err
		}
	}
	return s.publishOwnerKey(ctx, *opts)
}

// publishOwnerKey creates openfief-trusted-signers trusting the local owner
// key under ownerSignersName and starts mirroring it into signers.json.
func (s *Stack) publishOwnerKey(ctx context.Context, opts Options) error {
	signers, err := s.signer.SignersJSON(ownerSignersName)
	if err != nil {
		return err
	}
	if err := s.publishSigners(ctx, s.admin, opts.Dir, signers); err != nil {
		return err
	}
	s.mirrorSigners(s.admin, slog.New(slog.NewTextHandler(orDiscard(opts.Logs), nil)))
	return nil
}

// startEgressProxy starts the egress proxy as its own identity. With
// LocalPlugins and no resolver of the caller's, it first starts the
// loopback stand-ins, FakeNBP for api.nbp.pl and FakeDAV for FakeDAVHost
// (serving the directory webdav of Options.Dir), and points the proxy's
// resolver and dialer at them, since the demo has no internet.
func (s *Stack) startEgressProxy(_ context.Context, opts *Options) error {
	client, err := kubernetes.NewForConfig(s.clientConfig(*opts, ProxyUser))
	if err != nil {
		return err
	}
	if opts.LocalPlugins && opts.ProxyResolver == nil {
		nbp, err := StartFakeNBP("")
		if err != nil {
			return err
		}
		s.stops = append(s.stops, nbp.Close)
		s.FakeNBP = nbp
		dav, err := StartFakeDAV("", filepath.Join(opts.Dir, "webdav"))
		if err != nil {
			return err
		}
		s.stops = append(s.stops, dav.Close)
		s.FakeDAV = dav
		resolver, dialer, err := standInRoutes(nbp.route(), dav.route())
		if err != nil {
			return err
		}
		opts.ProxyResolver, opts.ProxyDialer, opts.UnsafeAllowPrefixes = resolver, dialer, LoopbackPrefixes()
	}
	return s.startProxy(client, *opts)
}

// startLocalPluginProcesses builds the demo plugins and runs every Plugin
// of a demo image as a local process, which the core then calls unless the
// caller chose where it calls plugins. The processes trust the stand-ins'
// CAs (SSL_CERT_FILE), when the stack started them.
func (s *Stack) startLocalPluginProcesses(_ context.Context, opts *Options) error {
	var cas [][]byte
	if s.FakeNBP != nil {
		cas = append(cas, s.FakeNBP.CAPEM())
	}
	if s.FakeDAV != nil {
		cas = append(cas, s.FakeDAV.CAPEM())
	}
	lctx, cancel := context.WithCancel(context.Background())
	lp, err := s.startLocalPlugins(lctx, *opts, cas)
	if err != nil {
		cancel()
		return err
	}
	s.local = lp
	s.stops = append(s.stops, func() {
		cancel()
		<-lp.done
	})
	if opts.CoreResolve == nil {
		opts.CoreResolve = lp.resolve
	}
	return nil
}

// startCoreStep starts openfief-core. With a real node and no resolver of
// the caller's, the core calls a plugin's Service by its ClusterIP, read
// from the API, since the node's host network has no cluster DNS.
func (s *Stack) startCoreStep(ctx context.Context, opts *Options) error {
	if opts.Node == devcluster.NodeReal && opts.CoreResolve == nil {
		opts.CoreResolve = clusterIPResolver(s.admin, slog.New(slog.NewTextHandler(orDiscard(opts.Logs), nil)))
	}
	return s.startCore(ctx, *opts)
}
