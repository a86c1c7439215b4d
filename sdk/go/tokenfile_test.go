// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenFileReadsOnEveryCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, "first-token\n")
	tf, err := NewTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tf.Read(); err != nil || got != "first-token" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	writeFile(t, path, "second-token")
	if got, err := tf.Read(); err != nil || got != "second-token" {
		t.Fatalf("after rotation Read = %q, %v", got, err)
	}
}

// TestTokenFileKubeletLayout rotates a token the way the kubelet does:
// token -> ..data/token, ..data -> a timestamped directory swapped
// atomically.
func TestTokenFileKubeletLayout(t *testing.T) {
	dir := t.TempDir()
	swap := func(gen, token string) {
		writeFile(t, filepath.Join(dir, gen, "token"), token)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(gen, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap("..2026_01", "token-one")
	if err := os.Symlink("..data/token", filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	tf, err := NewTokenFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tf.Read(); err != nil || got != "token-one" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	swap("..2026_02", "token-two")
	if got, err := tf.Read(); err != nil || got != "token-two" {
		t.Fatalf("after the swap Read = %q, %v", got, err)
	}
}

func TestTokenFileRefuses(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	writeFile(t, outside, "outside-secret")
	for name, setup := range map[string]func(dir string) string{
		"missing": func(dir string) string { return filepath.Join(dir, "token") },
		"empty": func(dir string) string {
			writeFile(t, filepath.Join(dir, "token"), " \n\t")
			return filepath.Join(dir, "token")
		},
		"link out of the directory": func(dir string) string {
			if err := os.Symlink(outside, filepath.Join(dir, "token")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "token")
		},
		"relative link out of the directory": func(dir string) string {
			if err := os.Symlink("../"+filepath.Base(filepath.Dir(outside))+"/secret", filepath.Join(dir, "token")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "token")
		},
		"too large": func(dir string) string {
			writeFile(t, filepath.Join(dir, "token"), strings.Repeat("a", maxTokenBytes+1))
			return filepath.Join(dir, "token")
		},
		"inner space": func(dir string) string {
			writeFile(t, filepath.Join(dir, "token"), "abc def")
			return filepath.Join(dir, "token")
		},
		"header injection": func(dir string) string {
			writeFile(t, filepath.Join(dir, "token"), "abc\r\nX-Evil: 1")
			return filepath.Join(dir, "token")
		},
		"a directory": func(dir string) string {
			if err := os.Mkdir(filepath.Join(dir, "token"), 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "token")
		},
	} {
		t.Run(name, func(t *testing.T) {
			tf, err := NewTokenFile(setup(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tf.Read()
			if err == nil {
				t.Fatalf("Read = %q, want an error", got)
			}
			for _, secret := range []string{"outside-secret", "abc", "aaaa"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows the file's content", err)
				}
			}
		})
	}
	if _, err := NewTokenFile(""); err == nil {
		t.Fatal("NewTokenFile(\"\") succeeded")
	}
	if _, err := NewTokenFile("/"); err == nil {
		t.Fatal("NewTokenFile(\"/\") succeeded")
	}
	if _, err := (TokenFile{}).Read(); err == nil {
		t.Fatal("zero TokenFile read something")
	}
}

func TestCoreTokenFileDefault(t *testing.T) {
	t.Setenv(EnvTokenFile, "")
	tf, err := CoreTokenFile()
	if err != nil {
		t.Fatal(err)
	}
	if tf.Path() != DefaultTokenPath {
		t.Fatalf("Path = %q, want %q", tf.Path(), DefaultTokenPath)
	}
	path := filepath.Join(t.TempDir(), "core-token")
	writeFile(t, path, "tok")
	t.Setenv(EnvTokenFile, path)
	tf, err = CoreTokenFile()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tf.Read(); err != nil || got != "tok" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	if !errors.Is(func() error { _, err := (mustTokenFile(t, filepath.Join(t.TempDir(), "e"), " ")).Read(); return err }(), ErrEmptyToken) {
		t.Fatal("an empty token is not ErrEmptyToken")
	}
}

func mustTokenFile(t *testing.T, path, content string) TokenFile {
	t.Helper()
	writeFile(t, path, content)
	tf, err := NewTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tf
}
