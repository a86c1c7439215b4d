package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// With a real node the API server is what a pod finds on a real cluster: it
// listens on the node's bridge address (pods reach it there, and through the
// kubernetes Service, whose endpoint is that address), its serving
// certificate names the Service's ClusterIP and DNS names, and it runs the
// ServiceAccount admission plugin, so every pod that asks for it gets the
// kube-api-access projected volume (token, kube-root-ca.crt, namespace).
// envtest leaves the plugin off (no controller manager there makes the
// default ServiceAccount); here the controller manager runs.

// Files the API server's serving certificate and ServiceAccount keys are
// written to in its certificate folder. envtest generates its own only when
// apiserver.crt is absent, so writing these first replaces its CA by ours.
const (
	apiServingCert = "apiserver.crt"
	apiServingKey  = "apiserver.key"
	saSigningKey   = "sa-signer.key" // private: the API server signs, the token controller reads it
	saPublicKey    = "sa-signer.pub" // public: the API server verifies with it
)

// APIServerPort is the API server's port on the node's bridge address.
const APIServerPort = 6443

// kubernetesServiceIP returns the ClusterIP the API server gives the
// kubernetes Service: the first address of the Service range serviceCIDR.
func kubernetesServiceIP(serviceCIDR string) net.IP {
	_, svc, _ := net.ParseCIDR(serviceCIDR)
	ip := make(net.IP, 4)
	copy(ip, svc.IP.To4())
	ip[3] = 1
	return ip
}

// servePods makes api listen on the node's bridge address at
// APIServerPort,
// with a serving certificate of a fresh CA naming that address, the
// kubernetes Service's ClusterIP and its DNS names, and fresh ServiceAccount
// keys. The CA becomes envtest's (the clients') and, through the
// controller manager's --root-ca-file, the pods' kube-root-ca.crt.
func (n *Node) servePods(api *envtest.APIServer) error {
	// 6443, kubeadm's port: NetworkPolicies see the API server at the
	// address and port a pod's connection to the kubernetes Service is
	// translated to, and deploy/'s name 443 and 6443. The bridge address is
	// this node's alone (one real node at a time), so the port is free.
	api.SecureServing.Address = n.net.gateway.String()
	api.SecureServing.Port = strconv.Itoa(APIServerPort)

	c, err := newLocalCA("openfief-apiserver-ca", time.Now())
	if err != nil {
		return err
	}
	der, keyDER, err := c.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{n.net.gateway, kubernetesServiceIP(n.net.serviceCIDR), net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + clusterDomain,
		},
	})
	if err != nil {
		return err
	}
	caDER := c.der
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	dir := api.CertDir
	if err := writeFiles(map[string][]byte{
		filepath.Join(dir, apiServingCert): pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		filepath.Join(dir, apiServingKey):  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		filepath.Join(dir, saSigningKey):   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}),
		filepath.Join(dir, saPublicKey):    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}); err != nil {
		return fmt.Errorf("devcluster: the API server's certificates: %w", err)
	}
	// envtest keeps a CA it did not make only if it is set before Start.
	api.SecureServing.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	args := api.Configure()
	args.Set("service-account-key-file", filepath.Join(dir, saPublicKey))
	args.Set("service-account-signing-key-file", filepath.Join(dir, saSigningKey))
	// The kubernetes Service's endpoint: the bridge address, which the
	// lease reconciler accepts (it refuses loopback).
	args.Set("advertise-address", n.net.gateway.String())
	args.Disable("disable-admission-plugins")
	args.Set("enable-admission-plugins", "NodeRestriction,ServiceAccount")
	return nil
}

// ConfigureAPIServer adds what a real kubelet and the pods need of the API
// server: the Node authorizer and NodeRestriction, the client certificate
// it presents to the kubelet, and serving the pods as on a real cluster
// (servePods: the bridge address, the kubernetes Service, ServiceAccount
// admission).
func (n *Node) ConfigureAPIServer(api *envtest.APIServer) error {
	if err := n.servePods(api); err != nil {
		return err
	}
	args := api.Configure()
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("kubelet-client-certificate", n.certs.apiServerClientCert)
	args.Set("kubelet-client-key", n.certs.apiServerClientKey)
	args.Set("kubelet-preferred-address-types", "InternalIP")
	return nil
}

// ControllerManagerArgs are the controller manager's extra flags: it gives
// the node its pod range, and its controllers act under their own
// ServiceAccounts (system:serviceaccount:kube-system:replicaset-controller,
// ...), as kubeadm's and kind's do, which deploy/admission's policy expects.
func (n *Node) ControllerManagerArgs() []string {
	return []string{
		"--use-service-account-credentials=true",
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + n.net.podCIDR.String(),
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + n.net.serviceCIDR,
	}
}
