// Command probe is the container the real-node tests run: it prints what it
// sees of its own confinement (user, seccomp mode, whether / is writable),
// then answers TCP on :8080 (or $OPENFIEF_LISTEN_PORT, when it plays a
// plugin) until stopped. For exec: `probe whoami` prints
// the user; `probe connect HOST:PORT` prints "open", "refused" or "timeout"
// for a TCP connection there.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "whoami" {
		fmt.Printf("exec: uid=%d gid=%d\n", os.Getuid(), os.Getgid())
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "connect" {
		fmt.Println(connect(os.Args[2]))
		return
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
	switch {
	case err == nil:
		_ = c.Close()
		return "open"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	default:
		return "error: " + err.Error()
	}
}
