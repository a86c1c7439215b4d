package node

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Leftovers lists every trace of a real node on this machine, one line
// each: state folders under StateRoot, processes naming it, links named
// of-* (and veths on them), mounts under it or the kubelet's default root,
// kube-router's iptables chains and ipsets, kube-proxy's nft tables, cgroup
// folders of-node-*, and the machine-wide folders the kubelet makes. With a
// node running it lists that node; after Stop or CleanLeftovers it
// should be empty. hack/dev/node-leftovers prints it (docs/node.md).
func Leftovers() ([]string, error) {
	var left []string
	if entries, err := os.ReadDir(StateRoot); err == nil {
		for _, e := range entries {
			left = append(left, "state folder "+filepath.Join(StateRoot, e.Name()))
		}
	}
	for _, pid := range processesMentioning(StateRoot, "") {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		left = append(left, fmt.Sprintf("process %d %s", pid, argv0))
	}
	if out, err := run("ip", "-o", "link", "show"); err == nil {
		for _, name := range linkNames(out) {
			if strings.HasPrefix(name, nodePrefix) {
				left = append(left, "link "+name)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, " master "+nodePrefix) {
				left = append(left, "link on our bridge: "+strings.Join(linkNames(line), ""))
			}
		}
	} else {
		return nil, err
	}
	for _, root := range []string{StateRoot, "/var/lib/kubelet"} {
		for _, m := range mountsUnder(root) {
			left = append(left, "mount "+m)
		}
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		out, err := run(ipt, "-w", "-t", "filter", "-S")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			for _, p := range routerChainPrefixes {
				if strings.Contains(line, " "+p) {
					left = append(left, ipt+" rule: "+line)
					break
				}
			}
		}
	}
	if out, err := run("ipset", "list", "-n"); err == nil {
		for _, name := range matchingIPSets(out, routerIPSetPrefixes) {
			left = append(left, "ipset "+name)
		}
	}
	if tables, err := nftTables(); err == nil {
		for _, t := range tables {
			if strings.HasSuffix(t, " kube-proxy") {
				left = append(left, "nft table "+t)
			}
		}
	}
	for _, h := range cgroupHierarchies() {
		matches, _ := filepath.Glob(filepath.Join(h, nodePrefix+"node-*"))
		for _, m := range matches {
			left = append(left, "cgroup "+m)
		}
	}
	for _, p := range nodeHostPaths {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, "path "+p)
		}
	}
	slices.Sort(left)
	return left, nil
}

// LeftoversWhenIdle is Leftovers taken while no real node runs on
// the machine: it waits (at most timeout) for the machine's node lock, which
// every running node holds, so a node another process runs meanwhile is
// not reported as left behind. Tests check their cleanup with it.
func LeftoversWhenIdle(timeout time.Duration) ([]string, error) {
	lock, err := lockNodes(timeout)
	if err != nil {
		return nil, err
	}
	defer unlockNodes(lock)
	// A node whose owner was killed frees the lock before anyone cleans up
	// after it (TestRealNodeCleanedAfterKill kills one on purpose, in
	// another test binary): it is not this process's leftover, and the next
	// node to start would clean it. Clean it first, then look.
	if err := cleanNodesOfDeadOwners(); err != nil {
		return nil, err
	}
	return Leftovers()
}
