// Command pause is the sandbox ("pause") process of the local real node's
// pods (docs/node.md): it holds the pod's namespaces, reaps orphaned children
// and exits on SIGINT or SIGTERM. hack/build/node.sh builds it statically and
// internal/devcluster/node wraps it in the node's pinned sandbox image, so no
// third-party pause image is pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited (orphans re-parented to us).
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
