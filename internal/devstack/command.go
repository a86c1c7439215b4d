package devstack

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/devcluster"
)

// ReadyFile is written into the state directory once `openfief dev` serves,
// so scripts can wait for it.
const ReadyFile = "ready"

// NewCommand builds `openfief dev` on the CLI's shared Env. It lives here,
// not in internal/cli, so the owner's CLI package never links the operator:
// cmd/openfief adds it to the root command.
func NewCommand(env *cli.Env) *cobra.Command {
	var (
		dir     string
		nodes   int
		verbose bool
		binDir  string
		local   bool
		node    string
		inCl    bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole platform on this machine until Ctrl-C",
		Long: `dev starts a local Kubernetes control plane built from source (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kwok playing the
kubelets), installs the CRDs and the openfief namespace, runs the operator, the egress
proxy and openfief-core (SQLite in the state directory) in this process, and
serves a loopback OCI registry with demo
plugin images signed by a local owner key that the operator trusts: the key
is in the ConfigMap openfief-trusted-signers, which the operator follows live
as an installed one does, so adding a vendor's key there lets that vendor's
images run ('openfief dev copy' brings an image into the registry with its
signatures).

It writes an admin kubeconfig, signers.json (a copy of that ConfigMap's,
rewritten on every change, for 'openfief plugin verify --signers') and an env
file of shell exports into the state directory, prints the commands to try
next, and stops everything cleanly on Ctrl-C. Pods are played by kwok: they
are scheduled and become Ready, but no container runs.

--local-plugins also plays the kubelet for the demo plugins: each Plugin that
runs a demo image runs as a local process built from this tree (nbp-fx, or the
view webdav-csv, with its granted Secrets as files), which openfief-core calls,
and the egress proxy sends api.nbp.pl and dav.openfief.test to loopback
stand-ins (NBP's API, a WebDAV server), since the demo needs no internet.
'openfief plugin status' then shows the core's syncs and exports, and the
view's CSV files appear in the state directory's webdav folder.

With --node real (root; make node builds it), one real node runs instead:
containerd, the kubelet, kube-proxy and kube-router's firewall, so plugins run
as containers and their NetworkPolicies are enforced on real packets; the
egress proxy then listens on the node's bridge address, and resolves
api.nbp.pl and dav.openfief.test to stand-ins at addresses of the node's
bridge (the demo images trust their CAs). It changes the
machine (a bridge, netfilter rules, cgroups, sysctls) and undoes it on exit,
or at the next start after a kill: see docs/node.md.

With --in-cluster (which implies --node real) the platform itself runs as
pods, as on a user's cluster: the operator, egress-proxy and openfief-core
images are built from this tree (or reused from .cache/images), pushed to the
node's registry and installed by 'openfief platform install' from a release
overlay; the cluster DNS (CoreDNS) runs as a pod and the core keeps its data on
a PersistentVolume. The demo images come from a registry on the node's bridge,
and api.nbp.pl is answered by a stand-in on the node. The CLI reaches the core
through the API server.

The control-plane binaries come from .bin/ (make controlplane builds them).`,
		Example: `  openfief dev
  # in another terminal:
  source .openfief-dev/env
  openfief plugin install fx --image "$OPENFIEF_DEMO_IMAGE_V1"`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return cli.UsageError(err)
			}
			var kind devcluster.NodeKind
			switch node {
			case "kwok":
			case "real":
				kind = devcluster.NodeReal
			default:
				return cli.UsageError(fmt.Errorf("--node must be kwok or real, got %q", node))
			}
			if inCl {
				switch {
				case cmd.Flags().Changed("node") && kind != devcluster.NodeReal:
					return cli.UsageError(fmt.Errorf("--in-cluster runs the platform as pods of a real node: it cannot take --node %s", node))
				case local:
					return cli.UsageError(fmt.Errorf("--in-cluster runs plugins as pods: it cannot take --local-plugins"))
				}
				kind = devcluster.NodeReal
			}
			_ = os.Remove(filepath.Join(abs, ReadyFile))
			var logs io.Writer
			if verbose {
				logs = env.ErrOut
			}
			ctx := cmd.Context()
			fmt.Fprintf(env.Out, "Starting the OpenFief platform in %s\n", abs)
			stack, err := Start(ctx, Options{Dir: abs, Nodes: nodes, Progress: env.Out, Logs: logs, BinDir: binDir, LocalPlugins: local, Node: kind, InCluster: inCl})
			if err != nil {
				return err
			}
			defer func() {
				fmt.Fprintln(env.Out, "Stopping: core, egress proxy, operator, registry, control plane...")
				stack.Stop()
				_ = os.Remove(filepath.Join(abs, ReadyFile))
				fmt.Fprintln(env.Out, "Stopped.")
			}()
			printDevSummary(env.Out, stack)
			if err := os.WriteFile(filepath.Join(abs, ReadyFile), []byte("ready\n"), 0o600); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		},
	}
	cmd.AddCommand(newCopyCommand(env))
	f := cmd.Flags()
	f.StringVar(&dir, "state-dir", ".openfief-dev", "directory for the kubeconfig, signers.json, the env file and logs")
	f.IntVar(&nodes, "nodes", 1, "number of fake nodes")
	f.StringVar(&node, "node", "kwok", "what plays the node: kwok (fake nodes, no container runs) or real (one real node; root, make node, docs/node.md)")
	f.BoolVarP(&verbose, "verbose", "v", false, "also print the control plane's, operator's and proxy's logs")
	f.StringVar(&binDir, "bin-dir", "", "directory of the control-plane binaries (default: the repository's .bin)")
	f.BoolVar(&local, "local-plugins", false, "run demo plugins as local processes the core calls, with loopback stand-ins for NBP and a WebDAV server")
	f.BoolVar(&inCl, "in-cluster", false, "run the platform itself as pods of a real node, installed by 'openfief platform install' (implies --node real)")
	return cmd
}

func printDevSummary(w io.Writer, s *Stack) {
	if s.PlatformImages != nil {
		printInClusterSummary(w, s)
		return
	}
	fmt.Fprintf(w, `
The platform is running.
  kubeconfig:      %s
  trusted signers: ConfigMap openfief-trusted-signers (the operator follows it; copied to %s)
  registry:        %s (copy a vendor's image with its signatures: openfief dev copy IMAGE REPOSITORY)
  egress proxy:    %s (metrics: http://%s/metrics)
  core (owner API): %s (the owner's token required; the CLI mints it)
  demo images:
`, s.KubeconfigPath, s.SignersFile, s.RegistryHost, s.ProxyAddress, s.ProxyMetricsAddress, s.CoreURL)
	for _, d := range DemoImages() {
		fmt.Fprintf(w, "    %-10s %s\n", d.Name, s.Images[d.Name])
	}
	fmt.Fprintf(w, `
Try, in another terminal:
  source %s
  openfief plugin verify "$OPENFIEF_DEMO_IMAGE_V1" --signers "$OPENFIEF_SIGNERS"
  openfief plugin install fx --image "$OPENFIEF_DEMO_IMAGE_V1"
  openfief plugin approve fx --yes
  openfief plugin list
  openfief dashboard                                            # the same, live in your browser
  kubectl get plugins,deployments,networkpolicies -n openfief   # any tool works with $KUBECONFIG

Press Ctrl-C to stop everything.
`, s.EnvFile)
}

// printInClusterSummary is printDevSummary for the in-cluster mode.
func printInClusterSummary(w io.Writer, s *Stack) {
	fmt.Fprintf(w, `
The platform is running in the cluster (version %s).
  kubeconfig:      %s
  trusted signers: ConfigMap openfief-trusted-signers (the operator follows it; copied to %s)
  overlay:         %s (on top of the release overlay %s)
  plugin registry: %s (push to %s; openfief dev copy IMAGE REPOSITORY copies one with its signatures)
  platform images:
`, s.PlatformVersion, s.KubeconfigPath, s.SignersFile, s.OverlayDir, s.ReleaseDir, s.RegistryHost, s.PushRegistry())
	for _, name := range PlatformImages {
		fmt.Fprintf(w, "    %-13s %s\n", name, s.PlatformImages[name])
	}
	fmt.Fprintln(w, "  demo images:")
	for _, d := range DemoImages() {
		fmt.Fprintf(w, "    %-13s %s\n", d.Name, s.Images[d.Name])
	}
	fmt.Fprintf(w, "  check probe:     %s (openfief check --isolation --probe-image <it>: a development CLI pins no probe)\n", s.CheckProbeImage())
	fmt.Fprintf(w, `
Try, in another terminal:
  source %s
  openfief platform status
  openfief plugin install fx --image "$OPENFIEF_DEMO_IMAGE_V1"
  openfief plugin approve fx --yes
  openfief plugin status fx                                     # the core's pod syncs it
  kubectl get pods -A                                           # any tool works with $KUBECONFIG

Press Ctrl-C to stop everything.
`, s.EnvFile)
}
