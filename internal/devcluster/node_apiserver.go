package devcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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

// APIServerNodePort is the API server's port on a real node's bridge
// address.
const APIServerNodePort = 6443

// kubernetesServiceIP returns the ClusterIP the API server gives the
// kubernetes Service: the first address of ServiceCIDR.
func kubernetesServiceIP() net.IP {
	_, svc, _ := net.ParseCIDR(ServiceCIDR)
	ip := make(net.IP, 4)
	copy(ip, svc.IP.To4())
	ip[3] = 1
	return ip
}

// servePods makes api listen on the node's bridge address at
// APIServerNodePort,
// with a serving certificate of a fresh CA naming that address, the
// kubernetes Service's ClusterIP and its DNS names, and fresh ServiceAccount
// keys. The CA becomes envtest's (the clients') and, through the
// controller manager's --root-ca-file, the pods' kube-root-ca.crt.
func (n *realNode) servePods(api *envtest.APIServer) error {
	// 6443, kubeadm's port: NetworkPolicies see the API server at the
	// address and port a pod's connection to the kubernetes Service is
	// translated to, and deploy/'s name 443 and 6443. The bridge address is
	// this node's alone (one real node at a time), so the port is free.
	api.SecureServing.Address = n.net.gateway.String()
	api.SecureServing.Port = strconv.Itoa(APIServerNodePort)

	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "openfief-apiserver-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{n.net.gateway, kubernetesServiceIP(), net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + clusterDomain,
		},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
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
