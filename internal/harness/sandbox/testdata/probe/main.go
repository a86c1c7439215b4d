// Command probe is the program the sandbox's tests run inside it: an HTTP
// server on loopback whose handlers try what a hostile plugin would and
// report what happened.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "where to serve")
	sigterm := flag.String("sigterm", "exit", "on SIGTERM: exit (a handler that exits), ignore (SIG_IGN), default (the Go runtime's)")
	hog := flag.Int("hog", 0, "allocate and touch this many MiB at start")
	flag.Parse()
	switch *sigterm {
	case "exit":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() { <-c; os.Exit(0) }()
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
	}
	if *hog > 0 {
		var keep [][]byte
		for range *hog {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("hog survived", len(keep))
	}
	http.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		c, err := net.DialTimeout(r.FormValue("net"), r.FormValue("addr"), time.Second)
		if err != nil {
			fmt.Fprint(w, err)
			return
		}
		_ = c.Close()
		fmt.Fprint(w, "ok")
	})
	http.HandleFunc("/lookup", func(w http.ResponseWriter, r *http.Request) {
		res := &net.Resolver{PreferGo: true}
		if server := r.FormValue("server"); server != "" {
			res.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, server)
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		_, err := res.LookupHost(ctx, r.FormValue("name"))
		fmt.Fprint(w, err)
	})
	http.HandleFunc("/whoami", func(w http.ResponseWriter, _ *http.Request) {
		out := map[string]string{}
		status, _ := os.ReadFile("/proc/self/status")
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Uid", "Gid", "Groups", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs":
				out[k] = strings.Join(strings.Fields(v), " ")
			}
		}
		out["pid"] = fmt.Sprint(os.Getpid())
		out["hostname"], _ = os.Hostname()
		if l, err := net.Listen("tcp", "127.0.0.1:80"); err != nil {
			out["bind80"] = err.Error()
		} else {
			_ = l.Close()
			out["bind80"] = "ok"
		}
		procs, _ := os.ReadDir("/proc")
		n := 0
		for _, p := range procs {
			if p.Name()[0] >= '0' && p.Name()[0] <= '9' {
				n++
			}
		}
		out["processes"] = fmt.Sprint(n)
		out["writeRoot"] = fmt.Sprint(os.WriteFile("/probe-was-here", nil, 0o644))
		out["writeTmp"] = fmt.Sprint(os.WriteFile("/tmp/probe-was-here", nil, 0o644))
		_, err := os.ReadFile("/etc/shadow-like")
		out["secret"] = fmt.Sprint(err)
		resolv, _ := os.ReadFile("/etc/resolv.conf")
		out["resolv"] = string(resolv)
		_ = json.NewEncoder(w).Encode(out)
	})
	if err := http.ListenAndServe(*addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
