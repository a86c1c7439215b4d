// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestConformanceEnvironment checks the shared vectors of the operator's
// environment (environment.json), which the TypeScript SDK's tests read too.
func TestConformanceEnvironment(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(conformanceDir, "environment.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		CoreAddress []struct {
			In    string `json:"in"`
			Valid bool   `json:"valid"`
		} `json:"core_address"`
		ListenPort []struct {
			In   string `json:"in"`
			Port *int   `json:"port"`
		} `json:"listen_port"`
		ProxyURL []struct {
			In  string  `json:"in"`
			Out *string `json:"out"`
		} `json:"proxy_url"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.CoreAddress) == 0 || len(f.ListenPort) == 0 || len(f.ProxyURL) == 0 {
		t.Fatal("a list of environment.json is empty")
	}
	for _, v := range f.CoreAddress {
		if _, err := parseCoreAddress(v.In); (err == nil) != v.Valid {
			t.Errorf("core address %q: error %v, want valid %v", v.In, err, v.Valid)
		}
	}
	for _, v := range f.ListenPort {
		t.Setenv(EnvListenPort, v.In)
		addr, err := ListenAddress()
		switch {
		case v.Port == nil && err == nil:
			t.Errorf("listen port %q = %s, want an error", v.In, addr)
		case v.Port != nil && (err != nil || addr != ":"+strconv.Itoa(*v.Port)):
			t.Errorf("listen port %q = %s, %v; want %d", v.In, addr, err, *v.Port)
		}
	}
	for _, v := range f.ProxyURL {
		u, err := parseProxyURL(v.In)
		switch {
		case v.Out == nil && err == nil:
			t.Errorf("proxy URL %q = %s, want an error", v.In, u)
		case v.Out != nil && (err != nil || u.String() != *v.Out):
			t.Errorf("proxy URL %q = %v, %v; want %s", v.In, u, err, *v.Out)
		}
	}
}
