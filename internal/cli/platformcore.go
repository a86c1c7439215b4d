package cli

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arkadiuss/openfief/deploy"
)

// The core's replicas as an overlay sets them: one on SQLite (the file has
// one writer, and nothing shares the plugins among replicas), any number on
// PostgreSQL, where leases do (docs/core.md, Several replicas).

// coreLayout reads the core's Deployment of objs: its replicas and whether
// its --database names PostgreSQL (a postgres:// DSN, or one from the
// environment, which only the postgres-replicas component sets); ok is
// false when objs hold no core.
func coreLayout(objs []*unstructured.Unstructured) (replicas int64, postgres, ok bool) {
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetName() != deploy.CoreDeployment {
			continue
		}
		replicas, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found {
			replicas = 1
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			m, _ := c.(map[string]any)
			args, _, _ := unstructured.NestedStringSlice(m, "args")
			for _, a := range args {
				if v, isDB := strings.CutPrefix(a, "--database="); isDB {
					postgres = strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") || strings.HasPrefix(v, "$(")
				}
			}
		}
		return replicas, postgres, true
	}
	return 0, false, false
}

// checkCoreReplicas refuses an overlay that runs the core as several
// replicas on SQLite.
func checkCoreReplicas(objs []*unstructured.Unstructured) error {
	if n, postgres, ok := coreLayout(objs); ok && n > 1 && !postgres {
		return exitf(ExitInvalid, "the overlay runs openfief-core as %d replicas on SQLite: SQLite is one replica's; several need PostgreSQL (deploy/core/components/postgres-replicas)", n)
	}
	return nil
}

// coreReplicasLine says how the installed core runs.
func coreReplicasLine(objs []*unstructured.Unstructured) string {
	n, postgres, ok := coreLayout(objs)
	switch {
	case !ok:
		return ""
	case postgres:
		return fmt.Sprintf("openfief-core: %d replica(s) on PostgreSQL, sharing the plugins by leases in the database", n)
	}
	return "openfief-core: one replica on SQLite (several replicas need PostgreSQL: deploy/core/components/postgres-replicas)"
}
