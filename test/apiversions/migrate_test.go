//go:build cluster

package apiversions

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// migrationManager is the field manager the storage migration writes as.
const migrationManager = "openfief-storage-migration"

// migrated counts what one storage migration did to a resource.
type migrated struct {
	// Rewritten objects were written back and got a new resourceVersion:
	// the API server stored them again, in its storage version.
	Rewritten int
	// Unchanged objects were written back and kept their resourceVersion:
	// they were stored in the storage version already, so what the API
	// server would have written equalled what it held, and it skipped the
	// write.
	Unchanged int
	// Gone objects were deleted between the list and their write.
	Gone int
}

// migrateStorage rewrites every object of one resource in the API server's
// storage version, as kube-storage-version-migrator does and as a client
// can: list in pages, then write each object back exactly as read (an
// update with its resourceVersion). The API server decodes what it stored
// in the old version, converts it and stores it in the new one, so even an
// unchanged object is written again (an object already stored in the new
// version encodes to the bytes held, and the API server skips that write). A conflict means another writer got
// there first and stored the object in the new version already, but the
// migration reads it again and writes it anyway, so "rewritten" stays a
// fact it saw; an object deleted meanwhile needs nothing. Run it only once
// discovery reports the new storage version hash for the resource, so no
// write lands in the old version.
func migrateStorage(ctx context.Context, dyn dynamic.Interface, res schema.GroupVersionResource) (migrated, error) {
	var out migrated
	r := dyn.Resource(res)
	opts := metav1.ListOptions{Limit: 100}
	for {
		page, err := r.List(ctx, opts)
		if err != nil {
			return out, fmt.Errorf("list %s: %w", res.Resource, err)
		}
		for i := range page.Items {
			obj := &page.Items[i]
			for attempt := 0; ; attempt++ {
				updated, err := r.Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{FieldManager: migrationManager})
				switch {
				case err == nil && updated.GetResourceVersion() != obj.GetResourceVersion():
					out.Rewritten++
				case err == nil:
					out.Unchanged++
				case apierrors.IsNotFound(err):
					out.Gone++
				case apierrors.IsConflict(err) && attempt < 5:
					fresh, gerr := r.Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
					if apierrors.IsNotFound(gerr) {
						out.Gone++
						break
					}
					if gerr != nil {
						return out, fmt.Errorf("%s %s/%s: %w", res.Resource, obj.GetNamespace(), obj.GetName(), gerr)
					}
					obj = fresh
					continue
				default:
					return out, fmt.Errorf("%s %s/%s: %w", res.Resource, obj.GetNamespace(), obj.GetName(), err)
				}
				break
			}
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}
