// Command node-leftovers lists what a local real node (docs/node.md) left on
// this machine, one line each, and exits 1 if anything is left; --clean first
// cleans up after every node whose starting process is gone (what the next
// start would do). `make node-leftovers` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/arkadiuss/openfief/internal/devcluster/node"
)

func main() {
	clean := flag.Bool("clean", false, "clean up after every node whose starting process is gone, then list what is left")
	flag.Parse()
	if *clean {
		if err := node.CleanLeftovers(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "node-leftovers:", err)
			os.Exit(2)
		}
	}
	left, err := node.Leftovers()
	if err != nil {
		fmt.Fprintln(os.Stderr, "node-leftovers:", err)
		os.Exit(2)
	}
	for _, l := range left {
		fmt.Println(l)
	}
	if len(left) > 0 {
		os.Exit(1)
	}
	fmt.Println("no real-node leftovers")
}
