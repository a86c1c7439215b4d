// Command probe is the container the real-node tests run: it prints what it
// sees of its own confinement (user, seccomp mode, whether / is writable),
// then sleeps until stopped; `probe whoami` prints the user and exits, for
// exec.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "whoami" {
		fmt.Printf("exec: uid=%d gid=%d\n", os.Getuid(), os.Getgid())
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
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
}
