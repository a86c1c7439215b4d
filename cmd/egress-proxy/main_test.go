//go:build cluster

package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The test runs the binary's wiring against a real API server (devcluster's
// minimal mode); without `make controlplane` it fails, saying so.
func TestMain(m *testing.M) { os.Exit(devcluster.Main(m)) }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// TestRun: /readyz follows the allow-list ConfigMap, /metrics serves the
// proxy's metrics, the proxy refuses GET, and cancelling (SIGTERM) ends run
// cleanly.
func TestRun(t *testing.T) {
	c := devcluster.Shared(t, devcluster.Options{Mode: devcluster.Minimal})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	testutil.EnsureNamespaces(t, cs, plugins.Namespace)
	o, kubeconfig := parseFlags([]string{
		"--listen", freeAddr(t), "--metrics-listen", freeAddr(t), "--kubeconfig", c.KubeconfigPath,
		"--dial-timeout", "1s", "--idle-timeout", "1m", "--review-cache-ttl", "1m",
		"--shutdown-grace", "1s", "--max-tunnels-per-plugin", "4", "--max-tunnels", "8",
	})
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, kubeconfig, o) }()

	get := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	waitFor("/healthz", func() bool { code, _ := get(o.MetricsListen, "/healthz"); return code == 200 })
	waitFor("/readyz to report the missing ConfigMap", func() bool {
		code, body := get(o.MetricsListen, "/readyz")
		return code == 503 && strings.Contains(body, "not found")
	})
	if _, err := cs.CoreV1().ConfigMaps(plugins.Namespace).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.AllowListConfigMap},
		Data:       map[string]string{"x": "api.bank.example:443\n"},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor("/readyz 200", func() bool { code, _ := get(o.MetricsListen, "/readyz"); return code == 200 })

	if code, _ := get(o.Listen, "/"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET on the proxy: %d, want 405", code)
	}
	_, metrics := get(o.MetricsListen, "/metrics")
	for _, name := range []string{"openfief_egress_decisions_total", "openfief_egress_open_tunnels", "go_goroutines"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
