package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// This file holds what the comparison benchmarks (compare_bench_test.go)
// run side by side, each proxy in a process of its own: the proxy as
// cmd/egress-proxy serves it and a bare Go CONNECT relay (this test binary,
// run again by startProxyProcess), stripe/smokescreen (the pinned tool
// module hack/tools/smokescreen), and the loopback servers behind them.

// benchHost is the name the benchmarks' tunnels ask for; the proxy resolves
// it to 127.0.0.1 (the others are given 127.0.0.1 itself).
const benchHost = "sink.bench.example"

// proxyPath is one way to reach a loopback server: directly, or through a
// CONNECT proxy at addr asking for target.
type proxyPath struct {
	name   string
	addr   string // the proxy's address; empty for a direct connection
	target func(port string) string
}

// openTimeout bounds opening one connection through a path.
const openTimeout = 20 * time.Second

// open returns a connection to the server on 127.0.0.1:port through p:
// for a proxy, the CONNECT answered with 200. Every proxy gets the same
// request, with our Proxy-Authorization; the others ignore it.
func (p proxyPath) open(port, auth string) (net.Conn, error) {
	if p.addr == "" {
		return net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	}
	c, err := net.DialTimeout("tcp", p.addr, openTimeout)
	if err != nil {
		return nil, err
	}
	// A stuck proxy fails the benchmark instead of hanging it.
	_ = c.SetDeadline(time.Now().Add(openTimeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }() // on a closed c too: nothing to lose
	target := p.target(port)
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\nProxy-Authorization: " + auth + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		_ = c.Close() // the write failed: nothing to lose
		return nil, err
	}
	br := bufio.NewReaderSize(c, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = c.Close() // unreadable answer: nothing to lose
		return nil, fmt.Errorf("%s: CONNECT: %w", p.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = c.Close() // refused: nothing to lose
		return nil, fmt.Errorf("%s: CONNECT: status %d", p.name, resp.StatusCode)
	}
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: c, r: br}, nil
	}
	return c, nil
}

// benchToken is a JWT-shaped egress token with an exp an hour ahead, so the
// CachingTokenReviewer keeps its review.
func benchToken() string {
	return jwt(fmt.Sprintf(`{"exp":%d}`, time.Now().Add(time.Hour).Unix()))
}

// acceptAll is the TokenReview API answering that every token is plugin x's.
type acceptAll struct{}

func (acceptAll) Review(context.Context, string) (string, error) {
	return plugins.ServiceAccountUsername("x"), nil
}

// benchServeEnv, when set in the environment of this test binary, makes it
// serve one proxy for the comparison benchmarks instead of running tests:
// "ours", "ours-splice" (Options.Splice) or "relay". The parent starts it with startProxyProcess, so every
// proxy compared runs in a process of its own, as smokescreen does, and its
// resident memory is its own.
const (
	benchServeEnv = "OPENFIEF_EGRESS_BENCH_SERVE"
	// benchPortsEnv lists the loopback ports plugin x may reach, comma-separated.
	benchPortsEnv = "OPENFIEF_EGRESS_BENCH_PORTS"
	// benchProfileEnv, when set, is where the served proxy writes a CPU
	// profile of its whole life (docs/performance.md); the splicing one
	// writes to the same path with "-splice" appended.
	benchProfileEnv = "OPENFIEF_EGRESS_BENCH_CPUPROFILE"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(benchServeEnv); role != "" {
		if err := serveForBench(role, strings.Split(os.Getenv(benchPortsEnv), ",")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if smokescreenBuild.path != "" {
		// The binary built for this run; a failed removal leaves a
		// temporary directory behind and nothing else.
		_ = os.RemoveAll(filepath.Dir(smokescreenBuild.path))
	}
	os.Exit(code)
}

// serveForBench serves role on a free loopback port, writes "listening
// ADDR" to stdout and serves until stdin ends.
func serveForBench(role string, ports []string) error {
	if path := os.Getenv(benchProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close() // a truncated profile shows when read
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var addr string
	var served <-chan error
	switch role {
	case "ours", "ours-splice":
		s, err := newBenchServer(ports, role == "ours-splice")
		if err != nil {
			return err
		}
		addr = s.Addr().String()
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx) }()
		served = done
	case "relay":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr = ln.Addr().String()
		done := make(chan error, 1)
		go func() {
			for {
				c, err := ln.Accept()
				if errors.Is(err, net.ErrClosed) {
					done <- nil
					return
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "relay: accept:", err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				go relayOne(c)
			}
		}()
		go func() {
			<-ctx.Done()
			_ = ln.Close() // stops the accept loop
		}()
		served = done
	default:
		return fmt.Errorf("unknown %s=%q", benchServeEnv, role)
	}
	fmt.Printf("listening %s\n", addr)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	cancel()
	return <-served
}

// newBenchServer is the proxy as cmd/egress-proxy serves it (NewServer:
// pending caps, access log, registered metrics, the CachingTokenReviewer in
// front of the reviewer) with plugin x allowed to reach benchHost on each of
// ports; splice sets Options.Splice.
func newBenchServer(ports []string, splice bool) (*Server, error) {
	var entries []string
	for _, p := range ports {
		entries = append(entries, benchHost+":"+p)
	}
	store := &AllowListStore{}
	store.Set(plugins.AllowLists{"x": entries})
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return NewServer(Config{
		Proxy: Options{
			Reviewer:            NewCachingTokenReviewer(acceptAll{}, WithReviewMetrics(m)),
			AllowLists:          store,
			Resolver:            loopbackOnly{},
			Logger:              slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Metrics:             m,
			MaxTunnelsPerPlugin: 1 << 20,
			MaxTunnels:          1 << 20,
			Splice:              splice,
			UnsafeAllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		},
		Addr:                "127.0.0.1:0",
		Registry:            reg,
		MaxPendingConns:     1 << 20,
		MaxPendingPerClient: 1 << 20,
	})
}

// startProxyProcess runs this test binary as role (see benchServeEnv) for
// the loopback ports, and returns the path to it and its process. The
// process ends when the benchmark does.
func startProxyProcess(tb testing.TB, role string, profile string, ports ...string) (proxyPath, *os.Process) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, benchProfileEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, benchServeEnv+"="+role, benchPortsEnv+"="+strings.Join(ports, ","))
	if profile != "" {
		cmd.Env = append(cmd.Env, benchProfileEnv+"="+profile)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close() // tells the child to stop
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("%s process: %v", role, err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // our own child, stuck: Wait reports it
			tb.Errorf("%s process did not stop: %v", role, <-done)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		tb.Fatalf("%s process: first line %q: %v", role, line, err)
	}
	target := func(port string) string { return net.JoinHostPort("127.0.0.1", port) }
	if strings.HasPrefix(role, "ours") {
		target = func(port string) string { return benchHost + ":" + port }
	}
	return proxyPath{name: role, addr: addr, target: target}, cmd.Process
}

// relayOne relays one client connection.
func relayOne(client net.Conn) {
	defer func() { _ = client.Close() }() // the relay's end: both peers see it
	br := bufio.NewReader(client)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		_, _ = io.WriteString(client, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer func() { _ = up.Close() }() // as above
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, client)
		_ = up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(client, up)
	_ = client.(*net.TCPConn).CloseWrite()
	<-done
}

// smokescreenBuild builds the pinned smokescreen once per test binary.
var smokescreenBuild struct {
	once sync.Once
	path string
	err  error
}

// smokescreenBinary builds stripe/smokescreen from hack/tools/smokescreen
// (its go.mod and go.sum pin it) into a directory that lives as long as the
// test binary's run, or says why it could not.
func smokescreenBinary() (string, error) {
	smokescreenBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "openfief-smokescreen-")
		if err != nil {
			smokescreenBuild.err = err
			return
		}
		out := filepath.Join(dir, "smokescreen")
		cmd := exec.Command("go", "build", "-o", out, "github.com/stripe/smokescreen")
		cmd.Dir = filepath.Join("..", "..", "hack", "tools", "smokescreen")
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		if b, err := cmd.CombinedOutput(); err != nil {
			smokescreenBuild.err = fmt.Errorf("go build in %s: %v: %s", cmd.Dir, err, strings.TrimSpace(string(b)))
			return
		}
		smokescreenBuild.path = out
	})
	return smokescreenBuild.path, smokescreenBuild.err
}

// startSmokescreen runs smokescreen v0.1.0 on a free loopback port with
// loopback allowed (it refuses private and loopback ranges by default) and
// no ACL file (every host allowed), or skips the benchmark saying why it
// could not build. It returns the path and the process.
func startSmokescreen(tb testing.TB) (proxyPath, *os.Process) {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skipf("smokescreen comparison runs on Linux only")
	}
	bin, err := smokescreenBinary()
	if err != nil {
		tb.Skipf("SKIP smokescreen: cannot build the pinned tool: %v", err)
	}
	port := freePort(tb)
	cmd := exec.Command(bin, "--listen-ip", "127.0.0.1", "--listen-port", port,
		"--allow-range", "127.0.0.0/8", "--statsd-address", "127.0.0.1:9")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard // its access log, one JSON line per request
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start smokescreen: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill() // our own child; Wait reports how it ended
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			mustClose(tb, c)
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("smokescreen did not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return proxyPath{name: "smokescreen", addr: addr, target: func(port string) string { return net.JoinHostPort("127.0.0.1", port) }}, cmd.Process
}

// freePort returns a loopback port that was free a moment ago.
func freePort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	mustClose(tb, ln)
	return port
}

// ackBatch is how many bytes the acking sink reads before it answers one
// byte: 64 chunks of 64 KiB.
const (
	benchChunk = 64 << 10
	ackBatch   = 64 * benchChunk
)

// startAckSink serves on 127.0.0.1: it reads and discards, and writes one
// byte for every ackBatch bytes read, so a writer can time a batch end to
// end over a long-lived connection.
func startAckSink(tb testing.TB) string {
	tb.Helper()
	port, _ := serveLoopback(tb, func(c net.Conn) {
		buf := make([]byte, benchChunk)
		var got int
		for {
			n, err := c.Read(buf)
			got += n
			for got >= ackBatch {
				got -= ackBatch
				if _, err := c.Write([]byte{1}); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	return port
}

// serveLoopback serves handle for every connection on 127.0.0.1 until the
// benchmark ends, closing each connection after handle and any still open at
// the end. It returns the port and a count of the connections open now.
func serveLoopback(tb testing.TB, handle func(net.Conn)) (string, func() int) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				// Out of file descriptors for a moment, say: the
				// client's dial waits in the backlog meanwhile.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				handle(c)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				_ = c.Close() // the server's end; the client sees it either way
			})
		}
	}()
	tb.Cleanup(func() {
		mustClose(tb, ln)
		mu.Lock()
		for c := range conns {
			_ = c.Close() // ends its handler
		}
		mu.Unlock()
		wg.Wait()
	})
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}

// startEchoPort serves an echo on 127.0.0.1 and returns its port and a count
// of its open connections. It copies through a small buffer, not io.Copy:
// io.Copy between two *net.TCPConn splices through a pipe, two more open
// files per idle connection, which 10,000 idle tunnels cannot afford.
func startEchoPort(tb testing.TB) (string, func() int) {
	tb.Helper()
	return serveLoopback(tb, func(c net.Conn) {
		_, _ = io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, 512))
	})
}

// processRSS returns the resident set size of process pid in bytes, from
// /proc.
func processRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}
