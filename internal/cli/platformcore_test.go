package cli

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func coreDeployment(replicas int64, database string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "openfief-core", "namespace": "openfief"},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "core", "args": []any{"--namespace=openfief", "--database=" + database}}},
		}}},
	}}
}

// TestCoreReplicasChecked: several replicas on SQLite are refused, one on
// SQLite and several on PostgreSQL pass, and the line after an install
// says which it is.
func TestCoreReplicasChecked(t *testing.T) {
	for _, c := range []struct {
		replicas int64
		database string
		refused  bool
		line     string
	}{
		{1, "/var/lib/openfief-core/core.db", false, "one replica on SQLite"},
		{2, "/var/lib/openfief-core/core.db", true, ""},
		{3, "sqlite:/data/core.db", true, ""},
		{3, "$(OPENFIEF_CORE_DSN)", false, "3 replica(s) on PostgreSQL"},
		{2, "postgres://core@db:5432/openfief", false, "2 replica(s) on PostgreSQL"},
	} {
		objs := []*unstructured.Unstructured{coreDeployment(c.replicas, c.database)}
		err := checkCoreReplicas(objs)
		if (err != nil) != c.refused {
			t.Errorf("%d on %s: %v, want refused %v", c.replicas, c.database, err, c.refused)
		}
		if err != nil && (ExitCode(err) != ExitInvalid || !strings.Contains(err.Error(), "SQLite is one replica's")) {
			t.Errorf("%d on %s: %v, want ExitInvalid naming the rule", c.replicas, c.database, err)
		}
		if c.line != "" && !strings.Contains(coreReplicasLine(objs), c.line) {
			t.Errorf("%d on %s: %q, want %q", c.replicas, c.database, coreReplicasLine(objs), c.line)
		}
	}
	if checkCoreReplicas(nil) != nil || coreReplicasLine(nil) != "" {
		t.Error("an overlay without the core is checked")
	}
}
