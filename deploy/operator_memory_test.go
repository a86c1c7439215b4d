package deploy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestOperatorSoftMemoryLimit checks the operator's soft memory limit as
// rendered: a GOMEMLIMIT the Go runtime reads (a whole number of MiB, the
// form the scale benchmark also hands its operator), at most 90% of the
// container's memory limit, so the heap's growth past it under pressure has
// room before the kernel's limit.
func TestOperatorSoftMemoryLimit(t *testing.T) {
	c := operatorContainer(t, renderOperator(t, "operator"))
	var soft string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			soft = e.Value
		}
	}
	mib, ok := strings.CutSuffix(soft, "MiB")
	if !ok || mib == "" || strings.TrimLeft(mib, "0123456789") != "" {
		t.Fatalf("GOMEMLIMIT %q, want a whole number then MiB", soft)
	}
	q, err := resource.ParseQuantity(mib + "Mi")
	if err != nil {
		t.Fatal(err)
	}
	hard := c.Resources.Limits.Memory()
	if hard.IsZero() || q.Value() > hard.Value()*9/10 {
		t.Errorf("GOMEMLIMIT %s against a memory limit of %s: want at most 90%% of it", soft, hard)
	}
}
