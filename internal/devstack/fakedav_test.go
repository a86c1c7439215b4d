package devstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFakeDAV puts a file through the stand-in as webdav-csv would: over
// TLS to FakeDAVHost trusting only its CA, with its credentials; without
// them, or into another folder than the one it holds, nothing is written.
func TestFakeDAV(t *testing.T) {
	root := filepath.Join(t.TempDir(), "dav")
	f, err := StartFakeDAV("", root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.CAPEM()) {
		t.Fatal("the stand-in's CA PEM does not parse")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		// The name resolves nowhere: the test dials the server itself, as
		// the egress proxy's dialer does.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, f.Addr())
		},
	}}
	put := func(url, user, pass string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, url, strings.NewReader("date,amount\n2026-11-30,1.5\n"))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, pass)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	file := f.FolderURL() + "2026-11-fx-rates.csv"
	if code := put(file, f.Username, "not-the-password"); code != http.StatusUnauthorized {
		t.Errorf("PUT with a wrong password: %d, want 401", code)
	}
	if code := put(strings.Replace(f.FolderURL(), "/openfief/", "/elsewhere/", 1)+"x.csv", f.Username, f.Password); code != http.StatusConflict {
		t.Errorf("PUT into a folder that does not exist: %d, want 409", code)
	}
	if code := put(file, f.Username, f.Password); code != http.StatusCreated {
		t.Fatalf("PUT with the credentials: %d, want 201", code)
	}
	files, err := f.Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0] != "2026-11-fx-rates.csv" {
		t.Fatalf("files in the folder: %q, want the one PUT", files)
	}
	body, err := f.ReadFile(files[0])
	if err != nil || !strings.HasPrefix(string(body), "date,amount\n") {
		t.Errorf("the file holds %q (%v)", body, err)
	}
	if _, err := f.ReadFile("../x"); err == nil {
		t.Error("ReadFile read outside the folder")
	}
	if got := f.Requests.Load(); got != 3 {
		t.Errorf("the stand-in counted %d requests, want 3", got)
	}
}
