// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin

package openfief

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// rawFD returns a descriptor of its own for what f refers to, which no
// os.File owns (Listen takes it over and closes it), and closes f.
func rawFD(t *testing.T, f *os.File) int {
	t.Helper()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return fd
}

// fileOf returns the descriptor of a copy of c's socket.
func fileOf(t *testing.T, c interface{ File() (*os.File, error) }) int {
	t.Helper()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	return rawFD(t, f)
}

// isOpen reports whether fd is an open descriptor.
func isOpen(fd int) bool {
	var st syscall.Stat_t
	return !errors.Is(syscall.Fstat(fd, &st), syscall.EBADF)
}

// TestServeConnectorOnInheritedListener serves a connector on a listener
// opened by someone else, as the local runner does: the connector answers
// there, the variable is gone once read, and when the connector stops the
// listener's owner still holds the port, so nobody else can bind it.
func TestServeConnectorOnInheritedListener(t *testing.T) {
	d, token := coreDir(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	port := held.Addr().(*net.TCPAddr).Port
	t.Setenv(EnvListenFD, strconv.Itoa(fileOf(t, held.(*net.TCPListener))))
	t.Setenv(EnvListenPort, strconv.Itoa(port))
	t.Setenv(EnvSAJWKSDir, d.dir)
	t.Setenv(EnvInstance, testInstance)
	t.Setenv(EnvCoreSubject, testSubject)

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeConnector(ctx, &fakeConnector{limit: 10}) }()

	url := "http://127.0.0.1:" + strconv.Itoa(port)
	client := connectorv1connect.NewConnectorServiceClient(h2cClient(token), url)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	resp, err := client.Sync(cctx, connect.NewRequest(&connectorv1.SyncRequest{BatchId: "b-fd"}))
	if err != nil {
		select {
		case serr := <-served:
			t.Fatalf("Sync: %v; ServeConnector ended: %v", err, serr)
		default:
			t.Fatalf("Sync: %v", err)
		}
	}
	if resp.Msg.GetDelivery().GetBatchId() != "b-fd" {
		t.Fatalf("batch ID %q", resp.Msg.GetDelivery().GetBatchId())
	}
	if v, ok := os.LookupEnv(EnvListenFD); ok {
		t.Errorf("%s is still set (%q) after Listen read it", EnvListenFD, v)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("ServeConnector = %v", err)
	}
	if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		_ = ln.Close()
		t.Fatal("another listener took the port after the connector stopped, while its owner still holds it")
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("bind the held port: %v, want EADDRINUSE", err)
	}
}

// TestListenRefusesInherited refuses every descriptor that is not a
// listening TCP socket on loopback on the announced port, naming the rule,
// and closes it.
func TestListenRefusesInherited(t *testing.T) {
	tcp := func(t *testing.T, addr string) *net.TCPListener {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		return ln.(*net.TCPListener)
	}
	tests := map[string]struct {
		fd   func(t *testing.T) (fd, port int)
		want string
	}{
		"a regular file": {func(t *testing.T) (int, int) {
			f, err := os.Create(filepath.Join(t.TempDir(), "f"))
			if err != nil {
				t.Fatal(err)
			}
			return rawFD(t, f), 0
		}, "not a listening socket"},
		"a UDP socket": {func(t *testing.T) (int, int) {
			c, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			return fileOf(t, c.(*net.UDPConn)), 0
		}, "not a listening socket"},
		"a Unix socket": {func(t *testing.T) (int, int) {
			ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ln.Close() }()
			return fileOf(t, ln.(*net.UnixListener)), 0
		}, "a unix socket, not TCP"},
		"a connected TCP socket, which does not listen": {func(t *testing.T) (int, int) {
			ln := tcp(t, "127.0.0.1:0")
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			return fileOf(t, c.(*net.TCPConn)), 0
		}, "does not listen"},
		"a listener on every address": {func(t *testing.T) (int, int) {
			return fileOf(t, tcp(t, ":0")), 0
		}, "not to a loopback address"},
		"a listener on another port than OPENFIEF_LISTEN_PORT": {func(t *testing.T) (int, int) {
			ln := tcp(t, "127.0.0.1:0")
			return fileOf(t, ln), ln.Addr().(*net.TCPAddr).Port%65535 + 1
		}, "not to the OPENFIEF_LISTEN_PORT"},
		"a closed descriptor": {func(t *testing.T) (int, int) {
			fd := fileOf(t, tcp(t, "127.0.0.1:0"))
			if err := syscall.Close(fd); err != nil {
				t.Fatal(err)
			}
			return fd, 0
		}, "not a listening socket"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fd, port := tt.fd(t)
			t.Setenv(EnvListenFD, strconv.Itoa(fd))
			t.Setenv(EnvListenPort, "")
			if port != 0 {
				t.Setenv(EnvListenPort, strconv.Itoa(port))
			}
			ln, err := Listen()
			if err == nil {
				_ = ln.Close()
				t.Fatalf("Listen took descriptor %d", fd)
			}
			if !strings.Contains(err.Error(), EnvListenFD+"=") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Listen: %v, want %s and %q", err, EnvListenFD, tt.want)
			}
			if isOpen(fd) {
				t.Errorf("descriptor %d is still open after the refusal", fd)
			}
			if _, ok := os.LookupEnv(EnvListenFD); ok {
				t.Errorf("%s is still set after Listen read it", EnvListenFD)
			}
		})
	}
}

// TestListenWithoutInheritedListener listens on OPENFIEF_LISTEN_PORT, as in
// a pod, when OPENFIEF_LISTEN_FD is not set; a set but empty one is
// refused, not taken for unset.
func TestListenWithoutInheritedListener(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	_ = free.Close()
	t.Setenv(EnvListenPort, strconv.Itoa(port))
	t.Setenv(EnvListenFD, "")
	if ln, err := Listen(); err == nil || !strings.Contains(err.Error(), EnvListenFD) {
		if ln != nil {
			_ = ln.Close()
		}
		t.Fatalf("Listen with an empty %s: %v, want a refusal naming it", EnvListenFD, err)
	}
	_ = os.Unsetenv(EnvListenFD)
	ln, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	if got := ln.Addr().(*net.TCPAddr).Port; got != port {
		t.Fatalf("listening on port %d, want %d", got, port)
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}

func TestParseListenFD(t *testing.T) {
	for in, want := range map[string]int{"3": 3, "4": 4, "1048576": 1 << 20} {
		if got, err := parseListenFD(in); err != nil || got != want {
			t.Errorf("parseListenFD(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "1", "2", "-3", "+3", "03", " 3", "3 ", "0x3", "1048577", "99999999999999999999", "three"} {
		if fd, err := parseListenFD(in); err == nil {
			t.Errorf("parseListenFD(%q) = %d, want a refusal", in, fd)
		}
	}
}

// FuzzParseListenFD: whatever the variable holds, parseListenFD takes only
// the canonical decimal of a descriptor from 3 to maxListenFD.
func FuzzParseListenFD(f *testing.F) {
	for _, s := range []string{"3", "0", "03", "-3", "1048577", "", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fd, err := parseListenFD(s)
		if err != nil {
			return
		}
		if fd < 3 || fd > maxListenFD || strconv.Itoa(fd) != s {
			t.Fatalf("parseListenFD(%q) = %d", s, fd)
		}
	})
}
