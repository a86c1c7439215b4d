package platform

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pollInterval is how often the command looks again while it waits.
const pollInterval = time.Second

// Apply server-side applies every object of s as FieldManager, taking over
// fields another manager holds (as `kubectl apply --server-side
// --force-conflicts` does): the namespace and the CRDs first, then, once
// every CRD is Established, the rest in order. It writes one line per object
// to out. An error names the object; the API server's message names the
// rule that refused it.
func Apply(ctx context.Context, c client.Client, s *Set, out io.Writer) error {
	var crds []*unstructured.Unstructured
	waited := false
	for _, u := range s.Objects {
		k, _ := kindOf(u.GroupVersionKind().GroupKind())
		if k.rank > crdRank && !waited {
			if err := waitEstablished(ctx, c, crds, out); err != nil {
				return err
			}
			waited = true
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s: %w", describe(u), err)
		}
		fmt.Fprintf(out, "applied %s\n", describe(u))
		if u.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, u)
		}
	}
	if !waited {
		return waitEstablished(ctx, c, crds, out)
	}
	return nil
}

// waitEstablished waits until every CRD reports Established=True, bounded by
// ctx.
func waitEstablished(ctx context.Context, c client.Client, crds []*unstructured.Unstructured, out io.Writer) error {
	for _, crd := range crds {
		var last string
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(crd.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got); err != nil {
				if apierrors.IsNotFound(err) {
					last = "not found"
					return false, nil
				}
				return false, err
			}
			status, reason := condition(got, "Established")
			last = "Established=" + status + " " + reason
			return status == "True", nil
		})
		if err != nil {
			return fmt.Errorf("%s did not become Established (%s): %w", describe(crd), last, err)
		}
		fmt.Fprintf(out, "%s is Established\n", describe(crd))
	}
	return nil
}

// condition returns the status and reason of the condition typ in an
// object's status.conditions, "Unknown" when absent.
func condition(u *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			return s, r
		}
	}
	return "Unknown", ""
}
