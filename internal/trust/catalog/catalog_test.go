package catalog

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestLoad: a development build carries the repository's catalog, which
// lists no plugin (D-43); a release links its own (OF-30).
func TestLoad(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Len() != 0 || Released() {
		t.Errorf("Load: %d entries, released %t; want the repository's empty catalog", c.Len(), Released())
	}
}

func TestFileIsACopy(t *testing.T) {
	f, err := File()
	if err != nil {
		t.Fatal(err)
	}
	f[0] = 'x'
	if _, err := Load(); err != nil {
		t.Fatalf("changing File's result changed the embedded catalog: %v", err)
	}
}

// releaseCatalog is a valid plugins.json with one entry published by a
// fresh key.
func releaseCatalog(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	file, err := json.Marshal(map[string]any{"plugins": []any{map[string]any{
		"name":      "nbp-fx",
		"image":     "registry.example/openfief/nbp-fx@sha256:" + strings.Repeat("ab", 32),
		"publisher": map[string]string{"name": "openfief-release", "publicKey": pub},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// TestReleased: the linked-in catalog replaces the embedded one, and one
// that does not decode or parse fails Load, so the operator does not start.
func TestReleased(t *testing.T) {
	t.Cleanup(func() { released = "" })
	file := releaseCatalog(t)
	released = Encode(file)
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 1 || c.Entries()[0].Name != "nbp-fx" || !Released() {
		t.Errorf("release catalog: %d entries %+v", c.Len(), c.Entries())
	}
	if got, _ := File(); string(got) != string(file) {
		t.Errorf("File returned %q, want the release's", got)
	}

	released = "not base64!"
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), "not base64") {
		t.Errorf("Load with a value that is not base64: %v", err)
	}
	released = Encode([]byte(`{"plugins": [{"name": "x"}]}`))
	if _, err := Load(); !errors.Is(err, plugins.ErrInvalidCatalog) {
		t.Errorf("Load with an invalid release catalog: %v, want ErrInvalidCatalog", err)
	}
}

// TestLinkedWithX builds a program with and without -X Symbol=Encode(file)
// and runs it: Symbol must name the variable Load reads, or a release
// would silently ship the empty catalog.
func TestLinkedWithX(t *testing.T) {
	// go test's cache sees the files this process opens, not those the
	// child go build reads: open the program's so an edit reruns the test.
	sources, err := filepath.Glob("testdata/show/*.go")
	if err != nil || len(sources) == 0 {
		t.Fatalf("the program's files: %v, %d", err, len(sources))
	}
	for _, f := range sources {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	file := releaseCatalog(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, ldflags, want string
	}{
		{"development", "-s -w", "entries=0 released=false"},
		{"release", "-s -w -X " + Symbol + "=" + Encode(file), "nbp-fx sha256:" + strings.Repeat("ab", 32) + "\nentries=1 released=true"},
	} {
		bin := filepath.Join(dir, tc.name)
		build := exec.Command("go", "build", "-ldflags", tc.ldflags, "-o", bin, "./testdata/show")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%s: go build: %v\n%s", tc.name, err, out)
		}
		out, err := exec.Command(bin).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("%s build printed %q, want %q", tc.name, got, tc.want)
		}
	}
}
