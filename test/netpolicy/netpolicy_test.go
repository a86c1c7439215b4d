package netpolicy_test

import (
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/test/netpolicy"
)

// TestTruthTable computes the isolation truth table from the NetworkPolicies
// the platform really produces (the operator's, for two plugins, and the
// install manifests') with the reference engine and fails naming every cell
// that differs from the expected table (D-32, D-59).
func TestTruthTable(t *testing.T) {
	p := buildPlatform(t)
	got, err := netpolicy.Compute(p.World, p.List())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("policies: %s\ntruth table by the reference engine (cyclonus matcher):\n%s", strings.Join(sortedKeys(p.Policies), ", "), got)
	for _, d := range netpolicy.Expected(p.World.Ports).Diff(got) {
		t.Error(d)
	}
}
