package checkprobe

import (
	"context"
	"errors"
	"io"
	"net"
	"time"
)

// ServeReply is the whole answer of every connection the served probe
// accepts: the kubelet's TCP readiness probe and the other probe's tcp
// cells only need the connection to open, and a curl gets a readable reply.
const ServeReply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 21\r\nConnection: close\r\n\r\nopenfief check probe\n"

// Bounds of serving.
const (
	// maxServing bounds the connections answered at once; Accept waits
	// beyond it.
	maxServing = 64
	// serveTimeout bounds one connection's write and drain.
	serveTimeout = time.Second
	// maxDrainBytes bounds what is read from a client before closing, so
	// an HTTP client's request is consumed and the close is not a reset.
	maxDrainBytes = 64 << 10
	// acceptBackoff is the pause after a failed Accept.
	acceptBackoff = 50 * time.Millisecond
)

// Serve answers every connection of ln with ServeReply and closes it, until
// ctx ends; it then closes ln and returns nil.
func Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() }) // ends Accept
	defer stop()
	slots := make(chan struct{}, maxServing)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			time.Sleep(acceptBackoff) // a passing error, such as too many open files
			continue
		}
		slots <- struct{}{}
		go func() {
			defer func() { <-slots }()
			answer(conn)
		}()
	}
}

// answer writes ServeReply, half-closes, drains what the client sent for
// at most serveTimeout, and closes.
func answer(conn net.Conn) {
	defer func() { _ = conn.Close() }() // the reply is best effort
	_ = conn.SetDeadline(time.Now().Add(serveTimeout))
	if _, err := io.WriteString(conn, ServeReply); err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(conn, maxDrainBytes))
}
