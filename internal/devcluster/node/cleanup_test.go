package node

import (
	"slices"
	"testing"
)

func TestRuleFields(t *testing.T) {
	for line, want := range map[string][]string{
		`-A INPUT -m comment --comment "kube-router netpol - 4IA2OSFRMVNDXBVV" -j KUBE-ROUTER-INPUT`: {"-A", "INPUT", "-m", "comment", "--comment", "kube-router netpol - 4IA2OSFRMVNDXBVV", "-j", "KUBE-ROUTER-INPUT"},
		`-N KUBE-ROUTER-FORWARD`:           {"-N", "KUBE-ROUTER-FORWARD"},
		`-A X --comment "a \"b\" c"  -j Y`: {"-A", "X", "--comment", `a "b" c`, "-j", "Y"},
		`-A X --comment "" -j Y`:           {"-A", "X", "--comment", "", "-j", "Y"},
		``:                                 nil,
	} {
		if got := ruleFields(line); !slices.Equal(got, want) {
			t.Errorf("ruleFields(%q) = %q; want %q", line, got, want)
		}
	}
}

func TestMatchingIPSets(t *testing.T) {
	list := "KUBE-SRC-ABC\ninet6:KUBE-DST-XYZ\nother\nkube-router-pods\nKUBE-SVC-1\n"
	want := []string{"KUBE-SRC-ABC", "inet6:KUBE-DST-XYZ", "kube-router-pods"}
	if got := matchingIPSets(list, routerIPSetPrefixes); !slices.Equal(got, want) {
		t.Errorf("matchingIPSets = %q; want %q", got, want)
	}
}

func TestNFTHasRules(t *testing.T) {
	empty := "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority filter; policy accept;\n\t}\n}\n"
	if nftHasRules(empty) {
		t.Errorf("rules found in %q", empty)
	}
	full := "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tcounter packets 0 bytes 0 jump KUBE-ROUTER-INPUT\n\t}\n}\n"
	if !nftHasRules(full) {
		t.Errorf("no rule found in %q", full)
	}
}

func TestLinkNamesAndMountEscapes(t *testing.T) {
	out := "12: of-abc123: <BROADCAST,MULTICAST,UP> mtu 1500\n13: veth1a2b@if2: <BROADCAST> mtu 1500 master of-abc123\n"
	if got, want := linkNames(out), []string{"of-abc123", "veth1a2b"}; !slices.Equal(got, want) {
		t.Errorf("linkNames = %q; want %q", got, want)
	}
	if got := unescapeMount(`/run/a\040b`); got != "/run/a b" {
		t.Errorf("unescapeMount = %q", got)
	}
}
