package deploy_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/deploy"
)

// TestCoreSchemaAnnotation: the core's Deployment names the last migration
// of the core's store (internal/core/store/migrations/NNNN_name.sql) as the
// schema its core knows, so a new migration cannot ship with a stale
// annotation, which would let a platform downgrade start a core that
// refuses its record.
func TestCoreSchemaAnnotation(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "internal", "core", "store", "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the store's migrations: %v (%d files)", err, len(files))
	}
	latest := 0
	for _, f := range files {
		num, _, _ := strings.Cut(filepath.Base(f), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		latest = max(latest, v)
	}
	objs, err := deploy.Render("core")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetName() != deploy.CoreDeployment {
			continue
		}
		if got := u.GetAnnotations()[deploy.CoreSchemaAnnotation]; got != strconv.Itoa(latest) {
			t.Errorf("Deployment %s: %s=%q, want %d, the store's last migration", u.GetName(), deploy.CoreSchemaAnnotation, got, latest)
		}
		return
	}
	t.Fatalf("deploy/core renders no Deployment %s", deploy.CoreDeployment)
}
