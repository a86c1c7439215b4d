// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretDir(t *testing.T) {
	tests := map[string]struct {
		root, mountPath string
		want            string // "" means refused
		wantErr         string
	}{
		"in a pod: the mount path":         {"", "/etc/openfief/webdav-csv", "/etc/openfief/webdav-csv", ""},
		"under the root":                   {"/tmp/run/secrets", "/etc/openfief/webdav-csv", "/tmp/run/secrets/etc/openfief/webdav-csv", ""},
		"root with a trailing slash":       {"/tmp/run/", "/etc/x", "", EnvSecretsRoot},
		"relative root":                    {"run/secrets", "/etc/x", "", EnvSecretsRoot},
		"root with ..":                     {"/tmp/../etc", "/etc/x", "", EnvSecretsRoot},
		"relative mount path":              {"", "etc/x", "", "not an absolute path"},
		"mount path with ..":               {"/tmp/run", "/etc/../../x", "", "not a clean path"},
		"mount path with a trailing slash": {"", "/etc/x/", "", "not a clean path"},
		"the root itself":                  {"/tmp/run", "/", "", "never mounted at the root"},
		"empty mount path":                 {"/tmp/run", "", "", "not an absolute path"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvSecretsRoot, tt.root)
			got, err := SecretDir(tt.mountPath)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SecretDir(%q) with root %q = %q, %v; want an error containing %q", tt.mountPath, tt.root, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("SecretDir(%q) with root %q = %q, %v; want %q", tt.mountPath, tt.root, got, err, tt.want)
			}
		})
	}
}

// TestSecretDirReadsTheRunnersFiles is the local runner's case end to end:
// a Secret's key written under the root is read through the directory
// SecretDir returns for the manifest's mount path.
func TestSecretDirReadsTheRunnersFiles(t *testing.T) {
	root := t.TempDir()
	mount := "/etc/openfief/example"
	if err := os.MkdirAll(filepath.Join(root, "etc", "openfief", "example"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "openfief", "example", "username"), []byte("anna"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSecretsRoot, root)
	dir, err := SecretDir(mount)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "username"))
	if err != nil || string(got) != "anna" {
		t.Fatalf("read %q, %v; want anna", got, err)
	}
}

// FuzzSecretDir checks that whatever the environment and the mount path
// hold, an accepted directory lies strictly inside the root (or is the
// mount path itself without a root), so a Secret is never read from
// outside it.
func FuzzSecretDir(f *testing.F) {
	for _, s := range [][2]string{{"", "/etc/x"}, {"/r", "/etc/x"}, {"/r", "/../x"}, {"r", "/x"}, {"/r/", "/x"}, {"/", "/x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, root, mountPath string) {
		got, err := secretDir(root, mountPath)
		if err != nil {
			return
		}
		if root == "" {
			if got != mountPath {
				t.Fatalf("secretDir(%q, %q) = %q, want the mount path", root, mountPath, got)
			}
			return
		}
		rel, err := filepath.Rel(root, got)
		if err != nil || rel == "." || !filepath.IsLocal(rel) {
			t.Fatalf("secretDir(%q, %q) = %q, not strictly inside the root", root, mountPath, got)
		}
	})
}
