package platform

import (
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// FuzzCoreSchema: whatever the annotation holds, CoreSchema returns a
// positive number of at most six digits written exactly as the annotation,
// or says it has none, or refuses it; it never panics.
func FuzzCoreSchema(f *testing.F) {
	for _, s := range []string{"3", "0", "-1", "007", "+3", "999999", "1000000", " 3", "3\n", "٣", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		u.SetNamespace(plugins.Namespace)
		u.SetName(deploy.CoreDeployment)
		u.SetAnnotations(map[string]string{deploy.CoreSchemaAnnotation: v})
		n, ok, err := CoreSchema([]*unstructured.Unstructured{u})
		switch {
		case err != nil:
			if ok || n != 0 {
				t.Fatalf("CoreSchema(%q) = %d, %v with error %v", v, n, ok, err)
			}
		case !ok:
			t.Fatalf("CoreSchema(%q): present annotation read as absent", v)
		case n <= 0 || n > 999999:
			t.Fatalf("CoreSchema(%q) = %d: out of bounds", v, n)
		case strconv.Itoa(n) != v:
			t.Fatalf("CoreSchema(%q) = %d: does not read back", v, n)
		}
	})
}
