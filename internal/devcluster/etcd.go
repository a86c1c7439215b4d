package devcluster

import "net/url"

// EtcdURL is the loopback address etcd serves its clients on (plain HTTP,
// no authentication), for a test that checks what the API server stored,
// such as the version a custom resource is kept in. The API server keeps
// its objects under /registry.
func (c *Cluster) EtcdURL() *url.URL {
	u := *c.env.ControlPlane.Etcd.URL
	return &u
}
