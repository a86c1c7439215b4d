package platform

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// CoreSchema is the schema version of the core's store that the core among
// objs knows: its Deployment's deploy.CoreSchemaAnnotation. ok is false
// when objs hold no core Deployment or it names none (a release made
// before the annotation); an annotation that is not a positive decimal
// number of at most six digits, written plainly (no sign, no leading zero),
// is an error.
func CoreSchema(objs []*unstructured.Unstructured) (schema int, ok bool, err error) {
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetName() != deploy.CoreDeployment || u.GetNamespace() != plugins.Namespace {
			continue
		}
		v, found := u.GetAnnotations()[deploy.CoreSchemaAnnotation]
		if !found {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || len(v) > 6 || strconv.Itoa(n) != v {
			return 0, false, fmt.Errorf("the core's Deployment %s: annotation %s must be a positive number, the last schema version its core knows", deploy.CoreDeployment, deploy.CoreSchemaAnnotation)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// CheckCoreSchema refuses to move a platform whose core knows schema
// versions up to installed to a release (version next) whose core knows
// fewer, --allow-downgrade or not: the installed core has migrated the
// record to installed, and an older core refuses a record newer than it
// knows and stops. Going back past a migration takes a backup taken
// before it, restored into a fresh install of the older release.
func CheckCoreSchema(installed, nextSchema int, next string) error {
	if nextSchema >= installed {
		return nil
	}
	return fmt.Errorf("the core's record is at schema version %d, and the core of %s knows versions up to %d: it would refuse the record and stop. "+
		"To go back to %s, install it afresh (openfief platform uninstall --delete-data, then platform install) and restore a backup taken at schema version %d or older, such as the one the core took before migrating (openfief core restore)",
		installed, next, nextSchema, next, nextSchema)
}
