// Command probe is the container the real-node tests run: it prints what it
// sees of its own confinement (user, seccomp mode, whether / is writable),
// then answers TCP on :8080 (or $OPENFIEF_LISTEN_PORT, when it plays a
// plugin) until stopped. For exec: `probe whoami` prints
// the user; `probe connect HOST:PORT` prints "open", "refused" or "timeout"
// for a TCP connection there; `probe udp HOST:PORT` the same for a UDP
// datagram answered ("open" once an answer comes back); `probe proxy
// HOST:PORT` asks the egress proxy in $HTTPS_PROXY for a tunnel there with
// the token in $OPENFIEF_EGRESS_TOKEN_FILE and prints "status N" (200: the
// tunnel is open), or what the connection to the proxy met. `probe
// apiserver` prints the user the API server sees behind the pod's
// ServiceAccount token ("user NAME"); `probe resolve udp|tcp NAME
// [SERVER]` the addresses the cluster DNS (or SERVER, host:port) gives
// NAME over that transport; `probe write
// DIR` writes a file there and reads it back. With /attack.json in its
// image it also attacks from its first instruction (atstart.go); `probe
// at-start` prints what it found.
//
// The resource modes play a plugin that takes what it can: `probe ids`
// prints "uid=U gid=G groups=[...]"; `probe fill DIR` writes 1 MiB at a
// time into DIR until a write fails and prints "wrote N MiB: ERROR"; `probe
// alloc` touches 8 MiB more memory every 10 ms until it is killed, printing
// each 64 MiB; `probe fork N` starts up to N processes (each `probe sleep`),
// prints "started K: ERROR" (or "started K") and ends them; `probe spin S`
// keeps every CPU busy for S seconds.
package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "at-start" {
		fmt.Println(printAttack())
		return
	}
	if len(os.Args) == 1 {
		attackAtStart() // before anything else: see atstart.go
	}
	if len(os.Args) > 1 && os.Args[1] == "whoami" {
		fmt.Printf("exec: uid=%d gid=%d\n", os.Getuid(), os.Getgid())
		return
	}
	if len(os.Args) > 1 && resourceMode(os.Args[1:]) {
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "apiserver" {
		fmt.Println(apiserver())
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "write" {
		fmt.Println(write(os.Args[2]))
		return
	}
	if len(os.Args) > 3 && os.Args[1] == "resolve" {
		server := ""
		if len(os.Args) > 4 {
			server = os.Args[4]
		}
		fmt.Println(resolve(os.Args[2], os.Args[3], server))
		return
	}
	if len(os.Args) > 2 {
		switch os.Args[1] {
		case "connect":
			fmt.Println(connect(os.Args[2]))
			return
		case "udp":
			fmt.Println(udp(os.Args[2]))
			return
		case "proxy":
			fmt.Println(proxy(os.Args[2]))
			return
		}
	}
	seccomp := "unknown"
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
				seccomp = strings.TrimSpace(v)
			}
		}
	}
	rootWritable := true
	if f, err := os.Create("/probe-write"); err != nil {
		rootWritable = false
	} else {
		_ = f.Close()
	}
	fmt.Printf("probe: uid=%d gid=%d seccomp=%s root-writable=%v\n", os.Getuid(), os.Getgid(), seccomp, rootWritable)
	port := "8080"
	if p := os.Getenv("OPENFIEF_LISTEN_PORT"); p != "" {
		port = p
	}
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Println("probe: listen:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("probe\n"))
			_ = c.Close()
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
}

// connect reports what a TCP connection to addr meets.
func connect(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return result(err)
	}
	_ = c.Close()
	return "open"
}

// udp sends one datagram to addr and reports whether an answer comes back.
func udp(addr string) string {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("probe")); err != nil {
		return result(err)
	}
	buf := make([]byte, 512)
	if _, err := c.Read(buf); err != nil {
		return result(err)
	}
	return "open"
}

// proxy asks the egress proxy for a CONNECT tunnel to target.
func proxy(target string) string {
	u, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil || u.Host == "" {
		return "error: no HTTPS_PROXY"
	}
	token, err := os.ReadFile(os.Getenv("OPENFIEF_EGRESS_TOKEN_FILE"))
	if err != nil {
		return "error: no egress token"
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		return result(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	auth := base64.StdEncoding.EncodeToString([]byte("plugin:" + strings.TrimSpace(string(token))))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return result(err)
	}
	_ = resp.Body.Close()
	return fmt.Sprintf("status %d", resp.StatusCode)
}

// result names what a failed connection met. A dial that runs out of time
// fails with os.ErrDeadlineExceeded or, when the timeout is noticed outside
// the poller (a loaded machine), with the net package's own timeout error,
// which is not that value: both are a timeout.
func result(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "error: " + err.Error()
	}
}
