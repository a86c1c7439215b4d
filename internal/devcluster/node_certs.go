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
	"os"
	"path/filepath"
	"time"
)

// nodeCerts are the files of the node's own CA: the kubelet trusts client
// certificates it signed, and the API server presents one of them when it
// calls the kubelet (logs, exec, port-forward).
type nodeCerts struct {
	caFile              string // the CA certificate (kubelet's x509.clientCAFile)
	apiServerClientCert string // the API server's client certificate to the kubelet
	apiServerClientKey  string
}

// writeNodeCerts makes a fresh CA in dir and signs the API server's client
// certificate for the kubelet with it (CN kube-apiserver-kubelet-client,
// O system:masters, so the kubelet's webhook authorization lets it in). The
// CA key is never written: nothing else needs signing.
func writeNodeCerts(dir string) (nodeCerts, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nodeCerts{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "openfief-node-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nodeCerts{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nodeCerts{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nodeCerts{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nodeCerts{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nodeCerts{}, err
	}
	nc := nodeCerts{
		caFile:              filepath.Join(dir, "node-ca.crt"),
		apiServerClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		apiServerClientKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	for path, block := range map[string]*pem.Block{
		nc.caFile:              {Type: "CERTIFICATE", Bytes: caDER},
		nc.apiServerClientCert: {Type: "CERTIFICATE", Bytes: der},
		nc.apiServerClientKey:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return nodeCerts{}, fmt.Errorf("devcluster: node certificates: %w", err)
		}
	}
	return nc, nil
}
