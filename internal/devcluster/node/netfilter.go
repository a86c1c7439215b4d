package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// kube-router's firewall (v2.1.0) leaves these chains and the jumps to them
// behind on a normal exit, and its own --cleanup-config panics; cleanup
// removes them (docs/node.md).
var routerChainPrefixes = []string{"KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-"}

// routerIPSetPrefixes are the prefixes of the ipsets kube-router's firewall
// creates (with "inet6:" in front for IPv6).
var routerIPSetPrefixes = []string{"KUBE-SRC-", "KUBE-DST-", "KUBE-NWPLCY-", "kube-router-"}

// cleanNodeNetwork removes kube-proxy's and kube-router's rules and ipsets,
// the veths on the node's bridge and the bridge, host-local's and
// containerd's CNI caches of its network, and the nft tables iptables-nft
// created for them if they are empty now.
func cleanNodeNetwork(rec nodeRecord) error {
	var errs []error
	if rec.BinDir != "" {
		if _, err := os.Stat(filepath.Join(rec.BinDir, kubeProxyBin)); err == nil {
			if _, err := run(filepath.Join(rec.BinDir, kubeProxyBin), "--cleanup"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, fam := range []string{"ip", "ip6"} {
		if tableExists(fam, "kube-proxy") {
			if _, err := run("nft", "delete", "table", fam, "kube-proxy"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, removeRouterRules())
	if rec.Bridge != "" && strings.HasPrefix(rec.Bridge, nodePrefix) {
		if out, err := run("ip", "-o", "link", "show", "master", rec.Bridge); err == nil {
			for _, name := range linkNames(out) {
				if _, err := run("ip", "link", "delete", name); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if _, err := os.Stat(filepath.Join("/sys/class/net", rec.Bridge)); err == nil {
			if _, err := run("ip", "link", "delete", rec.Bridge); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if rec.CNINetwork != "" {
		_ = os.RemoveAll(filepath.Join("/var/lib/cni/networks", rec.CNINetwork))
		results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", rec.CNINetwork+"-*"))
		for _, r := range results {
			_ = os.Remove(r)
		}
	}
	// Tables iptables-nft made for kube-router, the kubelet or kube-proxy:
	// delete only those that did not exist before and hold no rule now.
	if now, err := nftTables(); err == nil {
		for _, t := range now {
			if slices.Contains(rec.NFTables, t) {
				continue
			}
			fam, name, _ := strings.Cut(t, " ")
			if out, err := run("nft", "list", "table", fam, name); err == nil && !nftHasRules(out) {
				if _, err := run("nft", "delete", "table", fam, name); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// removeRouterRules removes kube-router's firewall from the machine: its
// chains and the jumps to them in both families' filter tables, then its
// ipsets, which a rule naming them would keep in use.
func removeRouterRules() error {
	var errs []error
	for _, ipt := range []string{"iptables", "ip6tables"} {
		errs = append(errs, removeChains(ipt, "filter", routerChainPrefixes))
	}
	errs = append(errs, destroyIPSets(routerIPSetPrefixes))
	return errors.Join(errs...)
}

// waitForRules waits until kube-router's firewall is in place (its FORWARD
// chain is hooked in) and kube-proxy's table exists.
func (n *Node) waitForRules(ctx context.Context) error {
	return n.waitFor(ctx, "kube-proxy's and kube-router's rules", func(context.Context) (bool, error) {
		return routerHooked() && tableExists("ip", "kube-proxy"), nil
	})
}

// routerHooked reports whether kube-router's firewall is hooked in: FORWARD
// jumps to its KUBE-ROUTER-FORWARD chain.
func routerHooked() bool {
	out, err := run("iptables", "-w", "-t", "filter", "-S", "FORWARD")
	return err == nil && strings.Contains(out, "KUBE-ROUTER-FORWARD")
}

// tableExists reports whether the nft table family name exists.
func tableExists(family, name string) bool {
	_, err := run("nft", "list", "table", family, name)
	return err == nil
}

// nftHasRules reports whether nft's listing of one table holds a rule: a
// line inside a chain that is not the chain's type/hook/policy line.
func nftHasRules(listing string) bool {
	for _, line := range strings.Split(listing, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "", l == "}", strings.HasPrefix(l, "table "), strings.HasPrefix(l, "chain "), strings.HasPrefix(l, "type "):
		default:
			return true
		}
	}
	return false
}

// removeChains deletes, from table of ipt (iptables or ip6tables), every
// rule that jumps to a chain named with one of prefixes, then those chains.
func removeChains(ipt, table string, prefixes []string) error {
	out, err := run(ipt, "-w", "-t", table, "-S")
	if err != nil {
		// No such table: nothing of ours in it.
		return nil
	}
	ours := func(chain string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(chain, p) {
				return true
			}
		}
		return false
	}
	var chains []string
	var errs []error
	for _, line := range strings.Split(out, "\n") {
		f := ruleFields(line)
		switch {
		case len(f) >= 2 && f[0] == "-N" && ours(f[1]):
			chains = append(chains, f[1])
		case len(f) >= 2 && f[0] == "-A" && !ours(f[1]):
			if j := slices.Index(f, "-j"); j >= 0 && j+1 < len(f) && ours(f[j+1]) {
				args := append([]string{"-w", "-t", table, "-D"}, f[1:]...)
				if _, err := run(ipt, args...); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, c := range chains {
		if _, err := run(ipt, "-w", "-t", table, "-F", c); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range chains {
		if _, err := run(ipt, "-w", "-t", table, "-X", c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ruleFields splits a line of `iptables -S` into its arguments: on spaces,
// except inside double quotes (comments), which it removes; \" and \\ inside
// quotes stand for themselves.
func ruleFields(line string) []string {
	var (
		fields []string
		cur    strings.Builder
		quoted bool
		inWord bool
	)
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted && ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			quoted = !quoted
			inWord = true
		case ch == ' ' && !quoted:
			if inWord {
				fields = append(fields, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		fields = append(fields, cur.String())
	}
	return fields
}

// destroyIPSets destroys every ipset named with one of prefixes (with or
// without "inet6:" in front).
func destroyIPSets(prefixes []string) error {
	out, err := run("ipset", "list", "-n")
	if err != nil {
		return nil
	}
	var errs []error
	for _, name := range matchingIPSets(out, prefixes) {
		if _, err := run("ipset", "destroy", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// matchingIPSets returns the names in `ipset list -n` output that start with
// one of prefixes, optionally after "inet6:".
func matchingIPSets(list string, prefixes []string) []string {
	var names []string
	for _, name := range strings.Fields(list) {
		bare := strings.TrimPrefix(name, "inet6:")
		for _, p := range prefixes {
			if strings.HasPrefix(bare, p) {
				names = append(names, name)
				break
			}
		}
	}
	return names
}

// linkNames returns the interface names of `ip -o link show` output.
func linkNames(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	return names
}
