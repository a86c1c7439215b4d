// Command cluster runs the full development control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok with fake
// nodes) in the foreground until interrupted, then stops it and removes its
// files. It prints the path of an admin kubeconfig for kubectl-style tools.
//
// Run it with `make cluster`, which builds the binaries first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

func main() {
	nodes := flag.Int("nodes", 1, "number of fake nodes")
	crds := flag.String("crds", "", "directory of CustomResourceDefinitions to install")
	verbose := flag.Bool("v", false, "copy every component's output to standard error")
	flag.Parse()
	// envtest logs through controller-runtime; the components' own logs are
	// in the cluster's log directory.
	ctrllog.SetLogger(logr.Discard())

	if err := run(*nodes, *crds, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(nodes int, crds string, verbose bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := devcluster.Options{Mode: devcluster.Full, Nodes: nodes}
	if crds != "" {
		opts.CRDDirectoryPaths = []string{crds}
	}
	if verbose {
		opts.Output = os.Stderr
	}
	began := time.Now()
	c, err := devcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "stopping the control plane...")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
	}()

	fmt.Printf("control plane up in %s (%d fake node(s)); API server %s\n",
		time.Since(began).Round(100*time.Millisecond), nodes, c.Config.Host)
	fmt.Printf("logs in %s\n", filepath.Join(c.Dir, "logs"))
	fmt.Printf("export KUBECONFIG=%s\n", c.KubeconfigPath)
	fmt.Println("press Ctrl-C to stop")
	<-ctx.Done()
	return nil
}
