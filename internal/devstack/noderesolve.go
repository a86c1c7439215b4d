package devstack

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// serviceLookupTimeout bounds one read of a plugin's Service.
const serviceLookupTimeout = 5 * time.Second

// clusterIPResolver is the core's Resolver with a real node. The core runs
// in this process, on the node's host network, where no cluster DNS answers
// plugin-<name>.openfief.svc; so it reads the name's Service from the API
// and calls its ClusterIP on the plugin port, as cluster DNS would answer a
// core pod. kube-proxy on the node routes host-originated traffic to
// ClusterIPs as it does a pod's, so the call takes the Service path a core
// pod's takes, whichever pod backs it (docs/node.md). A Service that cannot
// be read or has no ClusterIP gives no address (""): the call fails before
// any packet is sent, and the scheduler records and retries it.
func clusterIPResolver(cs kubernetes.Interface, log *slog.Logger) core.Resolver {
	return func(instance string) string {
		ctx, cancel := context.WithTimeout(context.Background(), serviceLookupTimeout)
		defer cancel()
		name := plugins.ServiceAccountName(instance)
		svc, err := cs.CoreV1().Services(plugins.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			log.Warn("plugin Service not read; not calling the plugin", "plugin", instance, "error", err.Error())
			return ""
		}
		ip := net.ParseIP(svc.Spec.ClusterIP)
		if ip == nil {
			log.Warn("plugin Service has no ClusterIP; not calling the plugin", "plugin", instance, "clusterIP", svc.Spec.ClusterIP)
			return ""
		}
		return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(plugins.DefaultPluginPort))
	}
}
