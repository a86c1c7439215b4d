package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/arkadiuss/openfief/internal/egress/proxyserver"
)

// TestParseFlags: without flags the command runs proxyserver's defaults,
// and each flag sets its field.
func TestParseFlags(t *testing.T) {
	ignore := cmpopts.IgnoreFields(proxyserver.Options{}, "Client", "Log", "Resolver", "Dialer")
	o, kubeconfig := parseFlags(nil)
	if diff := cmp.Diff(proxyserver.DefaultOptions(), o, ignore); diff != "" || kubeconfig != "" {
		t.Errorf("no flags: kubeconfig %q, options (-want +got):\n%s", kubeconfig, diff)
	}

	o, kubeconfig = parseFlags([]string{
		"--listen", "127.0.0.1:1", "--metrics-listen", "", "--namespace", "ns", "--allowlist-configmap", "cm",
		"--kubeconfig", "/k", "--dial-timeout", "1s", "--idle-timeout", "2s", "--review-cache-ttl", "0",
		"--shutdown-grace", "3s", "--max-tunnels-per-plugin", "4", "--max-tunnels", "5",
		"--max-pending-conns", "6", "--max-pending-per-client", "7", "--cluster-domain", "example.internal",
	})
	want := proxyserver.Options{
		Listen: "127.0.0.1:1", MetricsListen: "", Namespace: "ns", AllowListConfigMap: "cm",
		DialTimeout: time.Second, IdleTimeout: 2 * time.Second, ReviewCacheTTL: 0,
		ShutdownGrace: 3 * time.Second, MaxTunnelsPerPlugin: 4, MaxTunnels: 5,
		MaxPendingConns: 6, MaxPendingPerClient: 7, ClusterDomain: "example.internal",
	}
	if diff := cmp.Diff(want, o, ignore); diff != "" || kubeconfig != "/k" {
		t.Errorf("every flag: kubeconfig %q, options (-want +got):\n%s", kubeconfig, diff)
	}
}
