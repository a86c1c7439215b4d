// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// settledClock makes every file look older than stampSettle to v, so its
// stamps are trusted at once (the steady state of a mount).
func settledClock(v *JWKSVerifier) {
	v.now = func() time.Time { return time.Now().Add(time.Minute) }
}

// skipWithoutStamps skips where the platform reports no file stamp: there
// the verifier reads its files on every call and nothing is cached.
func skipWithoutStamps(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("no file stamps on %s: the files are read on every call", runtime.GOOS)
	}
}

// tickPast waits until a write now gets a later change time than one just
// before, whatever the kernel's timestamp granularity (a tick of at most
// 10 ms), as stampSettle guarantees in the verifier's own clock.
func tickPast() { time.Sleep(30 * time.Millisecond) }

func TestJWKSVerifierSkipsReadingSettledFiles(t *testing.T) {
	skipWithoutStamps(t)
	v := newJWKSDir(t, testIssuer, allKeys()...).verifier()
	settledClock(v)
	tok := ec256.sign(t, validClaims())
	if err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	read := v.current.Load()
	if read == nil || !read.trusted {
		t.Fatalf("after the first read: %+v, want a trusted stamp", read)
	}
	for range 3 {
		if err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if v.current.Load() != read {
		t.Fatal("unchanged settled files were read again")
	}
}

func TestJWKSVerifierReadsFreshFilesEveryCall(t *testing.T) {
	skipWithoutStamps(t)
	// The real clock: the files were written just now, so their stamp may
	// be shared with a write in the same tick and is not trusted.
	v := newJWKSDir(t, testIssuer, allKeys()...).verifier()
	tok := ec256.sign(t, validClaims())
	if err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	first := v.current.Load()
	if first.trusted {
		t.Fatal("a stamp less than stampSettle old was trusted")
	}
	if err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if v.current.Load() == first {
		t.Fatal("files changed less than stampSettle ago were not read again")
	}
}

func TestJWKSVerifierSettledStampsStillSeeRotation(t *testing.T) {
	skipWithoutStamps(t)
	oldJWKS := mustJWKS(t, rsaKey.jwk())
	newJWKS := mustJWKS(t, rsaKey2.jwk())
	if len(oldJWKS) != len(newJWKS) {
		t.Fatalf("the two key sets differ in size (%d, %d): the same-size cases would not be", len(oldJWKS), len(newJWKS))
	}
	oldToken := rsaKey.sign(t, validClaims())
	newToken := rsaKey2.sign(t, validClaims())

	for name, rotate := range map[string]func(t *testing.T, dir string){
		// The kubelet's atomic writer: new files in a new directory, and
		// the ..data link renamed over the old one.
		"kubelet ..data link swap": nil,
		// A new file renamed over the old one: a new inode, same size.
		"rename over": func(t *testing.T, dir string) {
			tmp := filepath.Join(dir, "jwks.tmp")
			if err := os.WriteFile(tmp, newJWKS, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, JWKSFileName)); err != nil {
				t.Fatal(err)
			}
		},
		// The same file rewritten in place with as many bytes, and its
		// modification time set back: only the change time moves.
		"same size, same mtime, in place": func(t *testing.T, dir string) {
			path := filepath.Join(dir, JWKSFileName)
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, newJWKS, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, before.ModTime(), before.ModTime()); err != nil {
				t.Fatal(err)
			}
			after, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
				t.Fatalf("rewrite changed size or mtime: %d %v -> %d %v", before.Size(), before.ModTime(), after.Size(), after.ModTime())
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			var v *JWKSVerifier
			var dir string
			if rotate == nil {
				d := newJWKSDir(t, testIssuer, rsaKey.jwk())
				v, dir = d.verifier(), d.dir
				rotate = func(*testing.T, string) { d.write(testIssuer, rsaKey2.jwk()) }
			} else {
				dir = t.TempDir()
				writeFile(t, filepath.Join(dir, IssuerFileName), testIssuer)
				writeFile(t, filepath.Join(dir, JWKSFileName), string(oldJWKS))
				var err error
				if v, err = NewJWKSVerifier(dir, testInstance, testSubject); err != nil {
					t.Fatal(err)
				}
			}
			settledClock(v)
			if err := v.Verify(oldToken); err != nil {
				t.Fatalf("before rotation: %v", err)
			}
			if cur := v.current.Load(); !cur.trusted {
				t.Fatal("stamps not trusted: the case would not test the stat path")
			}
			tickPast()
			rotate(t, dir)
			if err := v.Verify(oldToken); err == nil {
				t.Fatal("retired key still accepted after rotation")
			}
			if err := v.Verify(newToken); err != nil {
				t.Fatalf("new key after rotation: %v", err)
			}
		})
	}
}

func TestFileStampSettled(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	for name, tc := range map[string]struct {
		stamp fileStamp
		want  bool
	}{
		"changed long ago":           {fileStamp{ok: true, mtime: at(-time.Hour), ctime: at(-time.Hour)}, true},
		"changed exactly settle ago": {fileStamp{ok: true, mtime: at(-stampSettle), ctime: at(-stampSettle)}, true},
		"changed within settle":      {fileStamp{ok: true, mtime: at(-time.Hour), ctime: at(-stampSettle + time.Millisecond)}, false},
		"mtime set to the future":    {fileStamp{ok: true, mtime: at(time.Hour), ctime: at(-time.Hour)}, false},
		"no stamp on this platform":  {fileStamp{mtime: at(-time.Hour), ctime: at(-time.Hour)}, false},
	} {
		if got := tc.stamp.settled(now); got != tc.want {
			t.Errorf("%s: settled = %v, want %v", name, got, tc.want)
		}
	}
}

// mustJWKS is the JSON Web Key Set of keys.
func mustJWKS(t *testing.T, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
