package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// startSink serves on 127.0.0.1: it discards what it reads and, at EOF,
// answers "ok", so a writer knows everything arrived.
func startSink(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }() // after the ack: nothing left to lose
				_, _ = io.Copy(io.Discard, c)
				_, _ = io.WriteString(c, "ok")
			})
		}
	}()
	tb.Cleanup(func() {
		mustClose(tb, ln)
		wg.Wait()
	})
	return ln.Addr().String()
}

// sendAll writes b.N chunks to c, half-closes it and waits for the sink's
// acknowledgement.
func sendAll(b *testing.B, c net.Conn, closeWrite func() error) {
	chunk := make([]byte, 64<<10)
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := closeWrite(); err != nil {
		b.Fatal(err)
	}
	ack := make([]byte, 2)
	if _, err := io.ReadFull(c, ack); err != nil || string(ack) != "ok" {
		b.Fatalf("ack %q %v", ack, err)
	}
	b.StopTimer()
}

// BenchmarkThroughput compares one TCP stream to a loopback sink, directly
// and through a tunnel.
func BenchmarkThroughput(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		sink := startSink(b)
		c, err := net.Dial("tcp", sink)
		if err != nil {
			b.Fatal(err)
		}
		defer mustClose(b, c)
		sendAll(b, c, c.(*net.TCPConn).CloseWrite)
	})
	b.Run("proxy", func(b *testing.B) {
		e := newEnv(b, nil)
		sink := startSink(b)
		_, port, _ := net.SplitHostPort(sink)
		e.store.Set(plugins.AllowLists{"x": {"api.bank.example:" + port}})
		c := e.tunnel(tokenX, "api.bank.example:"+port)
		defer mustClose(b, c)
		sendAll(b, c, c.(*bufferedConn).Conn.(*net.TCPConn).CloseWrite)
	})
}

// BenchmarkNewConnection compares opening a connection and exchanging one
// byte, directly and through a new tunnel (authentication with an
// immediate reviewer, allow-list check, lookup, dial).
func BenchmarkNewConnection(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		echo := startEcho(b)
		buf := make([]byte, 1)
		for range b.N {
			c, err := net.Dial("tcp", echo)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
			mustClose(b, c)
		}
	})
	b.Run("proxy", func(b *testing.B) {
		e := newEnv(b, func(o *Options) { o.MaxTunnelsPerPlugin = 1 << 20; o.MaxTunnels = 1 << 20 })
		target := "api.bank.example:" + e.echoPort
		req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\nProxy-Authorization: " + basic(ProxyUser, tokenX) + "\r\n\r\n"
		buf := make([]byte, 1)
		b.ResetTimer()
		for range b.N {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.WriteString(c, req); err != nil {
				b.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("CONNECT: %v %v", resp, err)
			}
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(br, buf); err != nil {
				b.Fatal(err)
			}
			mustClose(b, c)
		}
	})
}
