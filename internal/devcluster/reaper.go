package devcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reaperScript runs in a shell of its own process group, reading process
// group ids from standard input. When the input ends without "disarm" (the
// process that started the cluster died without stopping it), it kills every
// group it was given and removes the cluster directory ($1). It ignores the
// terminal's signals so that a Ctrl-C reaching the test process cannot stop
// it before it has cleaned up.
//
// A line "node DIR CGROUP" names a real node's state folder and cgroup root:
// then it also kills every process in that cgroup tree (the pods) and every
// process whose command line names DIR (containerd's shims), so no container
// outlives a killed test. The node's rules, mounts and folders wait for
// CleanNodeLeftovers.
const reaperScript = `trap '' INT TERM HUP QUIT
pgids=
nodes=
while read -r line; do
	case "$line" in
	disarm) exit 0 ;;
	"node "*) nodes="$nodes ${line#node }" ;;
	*) pgids="$pgids $line" ;;
	esac
done
for g in $pgids; do kill -KILL "-$g" 2>/dev/null; done
set -- "$1" $nodes
cluster=$1
shift
while [ $# -ge 2 ]; do
	dir=$1 cg=$2
	shift 2
	for i in 1 2 3 4 5; do
		for f in /sys/fs/cgroup/*"$cg"/cgroup.procs /sys/fs/cgroup/*"$cg"/*/cgroup.procs /sys/fs/cgroup/*"$cg"/*/*/cgroup.procs /sys/fs/cgroup/*"$cg"/*/*/*/cgroup.procs /sys/fs/cgroup/*"$cg"/*/*/*/*/cgroup.procs; do
			[ -r "$f" ] && while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$f"
		done
		for p in /proc/[0-9]*; do
			case "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" in
			*"$dir"*) kill -KILL "${p#/proc/}" 2>/dev/null ;;
			esac
		done
		sleep 0.2
	done
done
rm -rf -- "$cluster"
`

// reaper is a watchdog process that cleans up after the cluster if the
// process that started it dies without calling Stop.
type reaper struct {
	cmd *exec.Cmd
	w   *os.File // write end of the reaper's standard input
}

// startReaper starts the watchdog for the cluster directory dir.
func startReaper(dir string) (*reaper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("devcluster: watchdog: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "devcluster-reaper", dir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close() // the start error is the one to report
		_ = w.Close()
		return nil, fmt.Errorf("devcluster: starting the watchdog: %w", err)
	}
	// The watchdog holds its own copy of the read end; the parent's copy only
	// needs releasing, so that the watchdog sees EOF when w closes.
	_ = r.Close()
	go func() { _ = cmd.Wait() }()
	return &reaper{cmd: cmd, w: w}, nil
}

// watchNode hands a real node's state folder and cgroup root to the
// watchdog. Neither may contain a space.
func (r *reaper) watchNode(dir, cgroupRoot string) error {
	_, err := fmt.Fprintf(r.w, "node %s %s\n", dir, cgroupRoot)
	return err
}

// watch hands the process group pgid to the watchdog.
func (r *reaper) watch(pgid int) error {
	_, err := fmt.Fprintf(r.w, "%d\n", pgid)
	return err
}

// disarm tells the watchdog that the cluster was stopped cleanly, so it exits
// without killing anything.
func (r *reaper) disarm() {
	_, _ = fmt.Fprintln(r.w, "disarm")
	_ = r.w.Close()
}

// childrenIn returns the ids of this process's direct children whose command
// line mentions dir: the watchdog and the processes envtest started for this
// cluster, whose process group ids equal their ids since both are started
// with Setpgid.
func childrenIn(dir string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses and may
		// itself hold spaces: state, ppid, pgrp, ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
