package netpolicy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/arkadiuss/openfief/test/netpolicy"
)

// TestDiff: every kind of difference is one line naming the cell, in the
// expected table's order, then got's extra cells.
func TestDiff(t *testing.T) {
	ports := netpolicy.Ports{Plugin: 8080, Core: 8080, Proxy: 3128, APIServer: 6443, NBPStandIn: 8443}
	want := netpolicy.Expected(ports)
	if d := want.Diff(want); d != nil {
		t.Fatalf("a table differs from itself: %q", d)
	}
	got := append(netpolicy.Table(nil), want...)
	got[0].Verdict = netpolicy.Allowed                                    // a verdict flips
	got[1].Cell.Port = 5353                                               // another port, same name
	got = append(got[:2], got[3:]...)                                     // a cell goes missing
	got = append(got, netpolicy.Row{Cell: netpolicy.Cell{Name: "extra"}}) // a cell nobody expects
	wantLines := []string{
		`cell "plugin → cluster DNS, UDP" (plugin → cluster-dns UDP/53): allowed, want refused`,
		`cell "plugin → cluster DNS, TCP": connection plugin → cluster-dns TCP/5353, want plugin → cluster-dns TCP/53`,
		`cell "plugin → resolver on the node, UDP" (plugin → node-resolver UDP/53): missing, want refused`,
		`cell "extra" ( →  /0): not in the expected table ()`,
	}
	if d := cmp.Diff(wantLines, want.Diff(got)); d != "" {
		t.Errorf("Diff (-want +got):\n%s", d)
	}
}

// TestCellsAreNamedOnce: names are the cells' keys.
func TestCellsAreNamedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range netpolicy.Cells(netpolicy.Ports{}) {
		if seen[c.Name] {
			t.Errorf("two cells named %q", c.Name)
		}
		seen[c.Name] = true
	}
}
