// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
)

// The environment the operator gives every plugin pod.
const (
	// EnvCoreAddress holds the core Service's ClusterIP and port, such as
	// "10.96.0.10:8080"; plugins have no DNS.
	EnvCoreAddress = "OPENFIEF_CORE_ADDRESS"
	// EnvListenPort holds the port the plugin serves the core on.
	EnvListenPort = "OPENFIEF_LISTEN_PORT"
	// EnvConfig holds the plugin instance's config, a JSON document the
	// operator checked against the manifest's JSON Schema.
	EnvConfig = "OPENFIEF_CONFIG"
	// EnvInstance holds the plugin instance's name.
	EnvInstance = "OPENFIEF_INSTANCE"
	// EnvCoreSubject holds the core's ServiceAccount username, the subject
	// of every token the core sends.
	EnvCoreSubject = "OPENFIEF_CORE_SUBJECT"
	// EnvSAJWKSDir holds the directory where the openfief-sa-jwks ConfigMap
	// is mounted.
	EnvSAJWKSDir = "OPENFIEF_SA_JWKS_DIR"
	// EnvTokenFile holds the path of the openfief-core token.
	EnvTokenFile = "OPENFIEF_TOKEN_FILE"
	// EnvEgressTokenFile holds the path of the openfief-egress token; set
	// only when an egress host is granted.
	EnvEgressTokenFile = "OPENFIEF_EGRESS_TOKEN_FILE"
	// EnvHTTPSProxy holds the egress proxy's URL; set only when an egress
	// host is granted.
	EnvHTTPSProxy = "HTTPS_PROXY"
)

// DefaultListenPort is the plugin port when OPENFIEF_LISTEN_PORT is unset,
// the operator's default.
const DefaultListenPort = 8080

// DefaultTokenPath is where the operator mounts the projected openfief-core
// token of every plugin pod.
const DefaultTokenPath = "/var/run/secrets/openfief/token"

// DefaultSAJWKSDir is where the operator mounts the openfief-sa-jwks
// ConfigMap in every plugin pod.
const DefaultSAJWKSDir = "/var/run/secrets/openfief-sa-jwks"

// CoreURL returns the base URL of the core's API from OPENFIEF_CORE_ADDRESS:
// http://<ClusterIP>:<port>. The address must be an IP literal with a port,
// because plugins have no DNS.
func CoreURL() (*url.URL, error) {
	u, err := parseCoreAddress(os.Getenv(EnvCoreAddress))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCoreAddress, err)
	}
	return u, nil
}

func parseCoreAddress(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("not set")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not <ip>:<port>: %w", s, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return nil, fmt.Errorf("%q: host must be an IP address", s)
	}
	if _, err := parsePort(port); err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(ip.String(), port)}, nil
}

// ListenAddress returns the address a plugin serves the core on, ":<port>"
// from OPENFIEF_LISTEN_PORT, or ":8080" when it is unset.
func ListenAddress() (string, error) {
	s := os.Getenv(EnvListenPort)
	if s == "" {
		return ":" + strconv.Itoa(DefaultListenPort), nil
	}
	p, err := parsePort(s)
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvListenPort, err)
	}
	return ":" + strconv.Itoa(p), nil
}

// parsePort accepts a decimal port from 1 to 65535, without sign or leading
// zero.
func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != s {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return p, nil
}

// LoadConfig decodes the plugin instance's config from OPENFIEF_CONFIG into
// v, which is usually a pointer to the plugin's config struct. An unset
// variable is the empty object {}, as in the operator's schema check. The
// decoding is strict: a field v does not have, or anything after the JSON
// value, is an error.
func LoadConfig(v any) error {
	if err := decodeConfig([]byte(os.Getenv(EnvConfig)), v); err != nil {
		return fmt.Errorf("%s: %w", EnvConfig, err)
	}
	return nil
}

func decodeConfig(b []byte, v any) error {
	if len(bytes.Trim(b, " \t\r\n")) == 0 {
		b = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}
