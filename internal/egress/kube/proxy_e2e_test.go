//go:build cluster

package kube

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// loopbackResolver resolves every name to 127.0.0.1.
type loopbackResolver struct{}

func (loopbackResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestProxyOnRealAdapters serves the proxy on these adapters through
// egress.NewServer and Server.Serve, as proxyserver does, on the real API
// server: TokenRequest
// tokens, TokenReview, and the ConfigMap missing, created, garbled, mended
// and deleted, with a tunnel open.
func TestProxyOnRealAdapters(t *testing.T) {
	cs, _ := cluster(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := echo.Close(); err != nil {
			t.Errorf("close the echo listener: %v", err)
		}
	}()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close() // the copy ended: nothing is left to lose
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(echo.Addr().String())
	target := "api.bank.example:" + port

	const cmName = "e2e-allowlist"
	inner, _ := NewTokenReviewer(cs.AuthenticationV1(), plugins.AudienceEgress)
	lists := WatchAllowLists(ctx, cs, plugins.Namespace, cmName, nil)
	srv, err := egress.NewServer(egress.Config{
		Proxy: egress.Options{
			Reviewer:            egress.NewCachingTokenReviewer(inner),
			AllowLists:          lists,
			Resolver:            loopbackResolver{},
			DialTimeout:         5 * time.Second,
			UnsafeAllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		},
		Addr:          "127.0.0.1:0",
		ShutdownGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	egressToken := requestToken(t, cs, plugins.Namespace, plugins.ServiceAccountName("e2e"), plugins.AudienceEgress)
	core := requestToken(t, cs, plugins.Namespace, plugins.ServiceAccountName("e2e"), plugins.AudienceCore)

	connect := func(token string) (int, net.Conn) {
		t.Helper()
		c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		auth := base64.StdEncoding.EncodeToString([]byte("plugin:" + token))
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			if err := c.Close(); err != nil {
				t.Errorf("close a refused connection: %v", err)
			}
			return resp.StatusCode, nil
		}
		_ = c.SetDeadline(time.Time{})
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("close a tunnel: %v", err)
			}
		})
		return resp.StatusCode, c
	}
	waitReady := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for ready, _ := lists.Ready(); ready != want; ready, _ = lists.Ready() {
			if time.Now().After(deadline) {
				t.Fatalf("Ready never became %v", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitClosed := func(c net.Conn) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("read data from a tunnel that should be closed")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("tunnel still open")
		}
	}
	echoOnce := func(c net.Conn) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		defer func() { _ = c.SetDeadline(time.Time{}) }() // fails only if c is closed: then no deadline matters
		_, _ = io.WriteString(c, "ping")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo %q %v", buf, err)
		}
	}

	waitReady(false)
	if code, _ := connect(egressToken); code != http.StatusForbidden {
		t.Fatalf("ConfigMap missing: %d, want 403", code)
	}

	cms := cs.CoreV1().ConfigMaps(plugins.Namespace)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName},
		Data:       map[string]string{"e2e": target + "\n"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(true)
	code, tunnel := connect(egressToken)
	if code != http.StatusOK {
		t.Fatalf("allowed: %d, want 200", code)
	}
	echoOnce(tunnel)
	if code, _ := connect(core); code != http.StatusProxyAuthRequired {
		t.Fatalf("openfief-core token: %d, want 407", code)
	}

	cm.Data = map[string]string{"e2e": target} // no final newline: does not decode
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitClosed(tunnel)
	waitReady(false)
	if code, _ := connect(egressToken); code != http.StatusForbidden {
		t.Fatalf("garbled ConfigMap: %d, want 403", code)
	}

	cm.Data = map[string]string{"e2e": target + "\n"}
	if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(true)
	code, tunnel = connect(egressToken)
	if code != http.StatusOK {
		t.Fatalf("mended: %d, want 200", code)
	}
	echoOnce(tunnel)
	if err := cms.Delete(ctx, cmName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitClosed(tunnel)
	if code, _ := connect(egressToken); code != http.StatusForbidden {
		t.Fatalf("ConfigMap deleted: %d, want 403", code)
	}
}
