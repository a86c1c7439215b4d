package node

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
	c, err := newLocalCA("openfief-node-ca", time.Now())
	if err != nil {
		return nodeCerts{}, err
	}
	der, keyDER, err := c.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nodeCerts{}, err
	}
	caDER := c.der
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

// localCA is a throwaway certificate authority for one node: its key lives
// only in memory, for the certificates signed at start.
type localCA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
	now  time.Time
	next int64 // the next serial number
}

// certLifetime bounds every certificate a localCA signs, the CA's own too:
// long enough for any test or dev session, short enough to be worthless
// afterwards.
const certLifetime = 7 * 24 * time.Hour

// newLocalCA makes a self-signed P-256 CA named cn, valid from a minute
// before now.
func newLocalCA(cn string, now time.Time) (*localCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &localCA{cert: cert, der: der, key: key, now: now, next: 2}, nil
}

// sign issues a leaf certificate for a new P-256 key with tmpl's subject,
// names and extended key usages (its serial, validity and key usage are set
// here), returning the certificate and the key in DER.
func (c *localCA) sign(tmpl *x509.Certificate) (certDER, keyDER []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = big.NewInt(c.next)
	c.next++
	tmpl.NotBefore = c.now.Add(-time.Minute)
	tmpl.NotAfter = c.now.Add(certLifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err = x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return certDER, keyDER, nil
}
