package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// saDir is where the ServiceAccount admission plugin mounts a pod's
// kube-api-access volume.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// apiserver asks the API server who the pod is, as an in-cluster client
// does: the address from KUBERNETES_SERVICE_HOST/PORT, the CA and the
// token from the kube-api-access volume, a SelfSubjectReview. It prints
// "user NAME" or what it met; never the token.
func apiserver() string {
	token, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		return "error: no token: " + err.Error()
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return "error: no ca.crt: " + err.Error()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "error: ca.crt holds no certificate"
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "error: no KUBERNETES_SERVICE_HOST/PORT"
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequest(http.MethodPost, "https://"+net.JoinHostPort(host, port)+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return result(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &review); err != nil {
		return "error: " + err.Error()
	}
	return "user " + review.Status.UserInfo.Username
}

// resolve looks name up over network ("udp" or "tcp") only, through server
// (host:port) or, when server is "", the resolver of the pod's
// /etc/resolv.conf (the kubelet's clusterDNS), and prints the sorted
// addresses or what it met. A plugin pod's resolv.conf may name no server,
// so a test asking whether a plugin reaches the cluster DNS names it.
func resolve(network, name, server string) string {
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, address string) (net.Conn, error) {
			if server != "" {
				address = server
			}
			d := net.Dialer{Timeout: 2 * time.Second}
			return d.DialContext(ctx, network, address)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		return "error: " + err.Error()
	}
	sort.Strings(addrs)
	return strings.Join(addrs, ",")
}

// write writes "probe wrote here" to dir/probe-data, reads it back and
// prints "wrote N bytes" or what it met.
func write(dir string) string {
	path := filepath.Join(dir, "probe-data")
	want := []byte("probe wrote here\n")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		return "error: " + err.Error()
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	if !bytes.Equal(got, want) {
		return fmt.Sprintf("error: read back %q", got)
	}
	return fmt.Sprintf("wrote %d bytes", len(got))
}
