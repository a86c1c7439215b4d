//go:build cluster

package cli

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestCoreBackupRestoreThroughProxy: `core backup` and `core restore`
// stream a backup of some MiB through the real API server's service proxy
// to a stand-in core, whole both ways, the owner's token in its header.
func TestCoreBackupRestoreThroughProxy(t *testing.T) {
	k := newKube(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := plugins.Namespace
	t.Setenv(EnvCoreURL, "")
	testutil.EnsureServiceAccount(t, cs, ns, ownerapi.ServiceAccount)

	// A backup of random text: gzip cannot shrink it much.
	var plain bytes.Buffer
	plain.WriteString(`{"t":"header","format":1,"schema":[1,2,3],"database":"sqlite","time":"2026-12-06T07:00:00Z"}` + "\n")
	plain.WriteString(`{"t":"table","name":"problems","columns":["message","n"],"types":["text","int"]}` + "\n")
	const rows = 200_000
	buf := make([]byte, 32)
	for i := range rows {
		_, _ = rand.Read(buf)
		fmt.Fprintf(&plain, "[%q,%d]\n", hex.EncodeToString(buf), i)
	}
	fmt.Fprintf(&plain, `{"t":"end","rows":%d}`+"\n"+`{"t":"trailer","rows":{"problems":%d},"sha256":"00"}`+"\n", rows, rows)
	var backup bytes.Buffer
	zw := gzip.NewWriter(&backup)
	_, _ = zw.Write(plain.Bytes())
	_ = zw.Close()

	var mu sync.Mutex
	var received []byte
	var tokens int
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ownerapi.PathBackup, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ownerapi.HeaderOwnerToken) != "" {
			mu.Lock()
			tokens++
			mu.Unlock()
		}
		w.Header().Set("Content-Type", ownerapi.BackupMediaType)
		for b := backup.Bytes(); len(b) > 0; {
			n := min(len(b), 32<<10)
			_, _ = w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	})
	mux.HandleFunc("POST "+ownerapi.PathRestore, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = body
		if r.Header.Get(ownerapi.HeaderOwnerToken) != "" {
			tokens++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ownerapi.RestoreResponse{Schema: 3, Database: "sqlite", RowsTotal: rows})
	})
	ip := testutil.HostAddress(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	testutil.EnsureServiceAccount(t, cs, ns, "stand-in")
	testutil.ServeServiceAt(t, cs, ns, ownerapi.ServiceName, ownerapi.ServicePort, "stand-in", ip, port)

	out := filepath.Join(t.TempDir(), "record.backup.gz")
	sum := sha256.Sum256(backup.Bytes())
	expect(t, openfief(t, k, runOpts{}, "core", "backup", "-o", out), ExitOK, "sha256: "+hex.EncodeToString(sum[:]), fmt.Sprintf("%d rows", rows))
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, backup.Bytes()) {
		t.Fatalf("the file holds %d bytes (%v), the core sent %d", len(got), err, backup.Len())
	}
	expect(t, openfief(t, k, runOpts{}, "core", "restore", out, "--yes"), ExitOK, fmt.Sprintf("restored %d rows", rows))
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(received, backup.Bytes()) || tokens != 2 {
		t.Errorf("the core received %d bytes of %d, %d requests with the owner's token (want 2)", len(received), backup.Len(), tokens)
	}
}
