// Command kube-controller-manager is the upstream kube-controller-manager of k8s.io/kubernetes, built from the
// version pinned in hack/tools/go.mod so tests run against a real controller manager.
package main

import (
	"os"
	_ "time/tzdata" // time zones, as upstream links them

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
