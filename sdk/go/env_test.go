// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"encoding/json"
	"testing"
)

func TestCoreURL(t *testing.T) {
	for in, want := range map[string]string{
		"10.96.0.10:8080":    "http://10.96.0.10:8080",
		"[fd00::10]:443":     "http://[fd00::10]:443",
		"127.0.0.1:1":        "http://127.0.0.1:1",
		"":                   "",
		"10.96.0.10":         "",
		"core:8080":          "",
		"core.svc:8080":      "",
		"10.96.0.10:0":       "",
		"10.96.0.10:65536":   "",
		"10.96.0.10:080":     "",
		"10.96.0.10:+80":     "",
		"[fe80::1%eth0]:1":   "",
		"http://10.0.0.1:80": "",
	} {
		t.Run(in, func(t *testing.T) {
			t.Setenv(EnvCoreAddress, in)
			u, err := CoreURL()
			if want == "" {
				if err == nil {
					t.Fatalf("CoreURL = %v, want an error", u)
				}
				return
			}
			if err != nil || u.String() != want {
				t.Fatalf("CoreURL = %v, %v; want %s", u, err, want)
			}
		})
	}
}

func TestListenAddress(t *testing.T) {
	for in, want := range map[string]string{
		"":      ":8080",
		"9090":  ":9090",
		"1":     ":1",
		"65535": ":65535",
		"0":     "",
		"-1":    "",
		"65536": "",
		"80x":   "",
		" 80":   "",
		"0080":  "",
	} {
		t.Run(in, func(t *testing.T) {
			t.Setenv(EnvListenPort, in)
			got, err := ListenAddress()
			if want == "" {
				if err == nil {
					t.Fatalf("ListenAddress = %q, want an error", got)
				}
				return
			}
			if err != nil || got != want {
				t.Fatalf("ListenAddress = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	type config struct {
		Accounts map[string]string `json:"accounts"`
		Currency string            `json:"currency"`
		Limit    json.Number       `json:"limit"`
	}
	for name, tt := range map[string]struct {
		env     string
		want    config
		wantErr bool
	}{
		"unset is empty":  {env: "", want: config{}},
		"values":          {env: `{"accounts":{"U123":"acc-1"},"currency":"PLN","limit":0.1}`, want: config{Accounts: map[string]string{"U123": "acc-1"}, Currency: "PLN", Limit: "0.1"}},
		"unknown field":   {env: `{"curency":"PLN"}`, wantErr: true},
		"trailing data":   {env: `{} {}`, wantErr: true},
		"trailing brace":  {env: `{}}`, wantErr: true},
		"not an object":   {env: `[1]`, wantErr: true},
		"truncated":       {env: `{"currency":`, wantErr: true},
		"space around it": {env: " \n{\"currency\":\"EUR\"}\n", want: config{Currency: "EUR"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvConfig, tt.env)
			var got config
			err := LoadConfig(&got)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("LoadConfig = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if string(gb) != string(wb) {
				t.Fatalf("LoadConfig = %s, want %s", gb, wb)
			}
		})
	}
}

// FuzzParseCoreAddress checks that whatever the operator's environment
// holds, CoreURL never panics and only ever yields http://<ip>:<port>.
func FuzzParseCoreAddress(f *testing.F) {
	for _, s := range []string{"10.0.0.1:80", "[::1]:443", "core:80", "", "1.2.3.4:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseCoreAddress(s)
		if err != nil {
			return
		}
		if u.Scheme != "http" || u.Port() == "" || u.User != nil || u.Path != "" {
			t.Fatalf("parseCoreAddress(%q) = %v", s, u)
		}
		again, err := parseCoreAddress(u.Host)
		if err != nil || again.String() != u.String() {
			t.Fatalf("not stable: %q -> %v -> %v, %v", s, u, again, err)
		}
	})
}

// FuzzDecodeConfig checks the strict config decoder never panics and that
// what it accepts is one JSON object.
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":1}`, `{} {}`, `[`, `{"a":{"b":[1,2,"x"]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v map[string]any
		if err := decodeConfig(b, &v); err != nil {
			return
		}
		if !json.Valid(b) && len(b) > 0 && string(b) != "" {
			// Only blank input may be accepted without being JSON.
			for _, c := range b {
				if c != ' ' && c != '\n' && c != '\t' && c != '\r' {
					t.Fatalf("accepted invalid JSON %q", b)
				}
			}
		}
	})
}
