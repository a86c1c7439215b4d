package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// ClusterConfig names the Services the operator reads the core's and the
// egress proxy's addresses from (the --core-service, --core-port,
// --proxy-service and --proxy-port flags), and what every plugin pod is told
// about the core.
type ClusterConfig struct {
	CoreService  string
	CorePort     string
	ProxyService string
	ProxyPort    string
	// CoreSubject is the core's ServiceAccount username (--core-service-account).
	CoreSubject string
	// PluginPort is the port plugins listen on; 8080 when zero.
	PluginPort int
	// Gate is the isolation gate every plugin pod starts with (OF-42).
	Gate IsolationGate
}

// Read looks up both Services in the openfief namespace and turns them into
// a Cluster. A missing core Service is an error; a missing proxy leaves only
// plugins without egress able to run.
func (cc ClusterConfig) Read(ctx context.Context, c client.Client) (Cluster, error) {
	core, err := getService(ctx, c, cc.CoreService)
	if err != nil {
		return Cluster{}, err
	}
	proxy, err := getService(ctx, c, cc.ProxyService)
	if err != nil {
		return Cluster{}, err
	}
	if core == nil {
		return Cluster{}, fmt.Errorf("core service %q: %w", cc.CoreService, ErrServiceMissing)
	}
	cl, err := ClusterFromServices(core, proxy, cc.CorePort, cc.ProxyPort)
	if err != nil {
		return Cluster{}, err
	}
	cl.Topology.CoreSubject = cc.CoreSubject
	cl.Topology.PluginPort = cc.PluginPort
	cl.Gate = cc.Gate
	return cl, nil
}

// getService returns the named Service, nil when it does not exist.
func getService(ctx context.Context, c client.Client, name string) (*corev1.Service, error) {
	if name == "" {
		return nil, nil
	}
	var s corev1.Service
	if err := c.Get(ctx, types.NamespacedName{Namespace: plugins.Namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read service %s: %w", name, err)
	}
	return &s, nil
}
