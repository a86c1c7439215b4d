package platform

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
)

// APIServerSource says where DiscoverAPIServer finds the addresses, for the
// line that tells the user what was chosen.
const APIServerSource = "the EndpointSlices of Service default/kubernetes"

// DiscoverAPIServer returns the API server's addresses as the cluster
// publishes them: every address of the EndpointSlices of the Service
// default/kubernetes, each as a /32 or /128, sorted. The endpoints and not
// the Service's ClusterIP: NetworkPolicies judge a connection after the
// Service's translation (deploy/core/networkpolicy.yaml).
func DiscoverAPIServer(ctx context.Context, c client.Reader) ([]string, error) {
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace("default"),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("read %s: %w", APIServerSource, err)
	}
	var addrs []string
	for _, s := range slices.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s hold no address: name the API server with --api-server-cidr", APIServerSource)
	}
	cidrs, err := deploy.APIServerCIDRs(addrs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", APIServerSource, err)
	}
	return cidrs, nil
}
