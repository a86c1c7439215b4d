package checkprobe

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestMainExitCodes: a refused request or an unknown command line exits 2
// with the reason on stderr and nothing on stdout.
func TestMainExitCodes(t *testing.T) {
	for name, args := range map[string][]string{
		"bad request":    {"run", `{"cells":[]}`},
		"no request":     {"run"},
		"unknown":        {"serve"},
		"two requests":   {"run", `{}`, `{}`},
		"too many cells": {"run", `{"cells":[` + strings.Repeat(`{"name":"x","kind":"tcp","target":"a:1"},`, 32) + `{"name":"y","kind":"tcp","target":"a:1"}]}`},
	} {
		var out, errOut strings.Builder
		if code := Main(t.Context(), args, &out, &errOut, func(string) string { return "" }); code != probewire.ExitBadRequest {
			t.Errorf("%s: exit %d, want %d", name, code, probewire.ExitBadRequest)
		}
		if out.Len() != 0 || errOut.Len() == 0 {
			t.Errorf("%s: stdout %q, stderr %q", name, out.String(), errOut.String())
		}
	}
}

// TestServe serves on the port of OPENFIEF_LISTEN_PORT: a connection gets
// the reply and is closed, and the probe exits 0 when its context ends.
func TestServe(t *testing.T) {
	port := strings.TrimPrefix(closedPort(t), "127.0.0.1:")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int)
	go func() {
		done <- Main(ctx, nil, io.Discard, io.Discard, func(k string) string {
			if k == plugins.EnvListenPort {
				return port
			}
			return ""
		})
	}()
	var conn net.Conn
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if conn, err = net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: probe\r\n\r\n")
	got, err := io.ReadAll(conn)
	_ = conn.Close()
	if err != nil || string(got) != ServeReply {
		t.Errorf("read %q, %v; want %q", got, err, ServeReply)
	}
	if n := strings.Index(ServeReply, "\r\n\r\n"); strconv.Itoa(len(ServeReply)-n-4) != "21" {
		t.Errorf("Content-Length 21 is not the body's length")
	}
	cancel()
	select {
	case code := <-done:
		if code != probewire.ExitOK {
			t.Errorf("exit %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the probe did not stop")
	}

	var errOut strings.Builder
	if code := Main(t.Context(), nil, io.Discard, &errOut, func(string) string { return "http" }); code != probewire.ExitFailed {
		t.Errorf("a bad port: exit %d, %s", code, errOut.String())
	}
}
