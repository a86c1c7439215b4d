package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/internal/display"
)

// WaitAvailable waits until every Deployment of s is Available with all its
// replicas updated to the applied template, bounded by ctx (the command's
// --timeout). It writes a progress line whenever a Deployment's state
// changes, and on timeout returns an error naming each Deployment that is
// not Available with its conditions and its ReplicaSets' failures (a pod
// refused by Pod Security or an admission policy shows there).
func WaitAvailable(ctx context.Context, c client.Client, s *Set, out io.Writer) error {
	deps := s.Deployments()
	last := map[string]string{}
	pending := map[string]bool{}
	for _, u := range deps {
		pending[u.GetName()] = true
	}
	ticker := newTicker()
	defer ticker.stop()
	for {
		for _, u := range deps {
			name := u.GetName()
			if !pending[name] {
				continue
			}
			var d appsv1.Deployment
			state := ""
			err := c.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: name}, &d)
			switch {
			case apierrors.IsNotFound(err):
				state = "not found"
			case err != nil && ctx.Err() == nil:
				return fmt.Errorf("read %s: %w", describe(u), err)
			case err == nil && DeploymentAvailable(&d):
				pending[name] = false
				fmt.Fprintf(out, "%s: Available (%d/%d)\n", describe(u), d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1))
				continue
			case err == nil:
				state = progress(&d)
			}
			if state != "" && state != last[name] {
				last[name] = state
				fmt.Fprintf(out, "waiting for %s: %s\n", describe(u), state)
			}
		}
		done := true
		for _, p := range pending {
			done = done && !p
		}
		if done {
			return nil
		}
		if err := ticker.wait(ctx); err != nil {
			return notAvailable(c, deps, pending, err)
		}
	}
}

// notAvailable is the error of a wait that ran out: each Deployment still
// pending, with what keeps it. It reads the cluster once more on a fresh
// context, as ctx is done.
func notAvailable(c client.Client, deps []*unstructured.Unstructured, pending map[string]bool, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var errs []error
	for _, u := range deps {
		if !pending[u.GetName()] {
			continue
		}
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, &d); err != nil {
			errs = append(errs, fmt.Errorf("%s did not become Available: %w", describe(u), err))
			continue
		}
		errs = append(errs, fmt.Errorf("%s did not become Available: %s", describe(u), why(ctx, c, &d)))
	}
	return fmt.Errorf("%w (%w)", errors.Join(errs...), cause)
}

// DeploymentAvailable reports whether the Deployment controller has seen
// the latest spec, every replica runs it and is available, no old replica is
// left, and the Deployment says Available=True: its rollout is complete.
func DeploymentAvailable(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want ||
		d.Status.AvailableReplicas != want || d.Status.Replicas != want {
		return false
	}
	c := deploymentCondition(d, appsv1.DeploymentAvailable)
	return c != nil && c.Status == corev1.ConditionTrue
}

// progress is a short account of a Deployment on its way.
func progress(d *appsv1.Deployment) string {
	s := fmt.Sprintf("%d/%d available, %d updated", d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1), d.Status.UpdatedReplicas)
	if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil {
		s += fmt.Sprintf(", Progressing=%s (%s)", c.Status, display.Text(c.Reason))
	}
	return s
}

// why says why a Deployment is not Available: its conditions and the
// failure conditions of its ReplicaSets, each message escaped (it can
// carry an admission policy's text).
func why(ctx context.Context, c client.Client, d *appsv1.Deployment) string {
	parts := []string{progress(d)}
	for _, cond := range d.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s): %s", cond.Type, cond.Status, display.Text(cond.Reason), display.Message(cond.Message)))
	}
	if d.Spec.Selector != nil {
		var rs appsv1.ReplicaSetList
		if err := c.List(ctx, &rs, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err == nil {
			for _, r := range rs.Items {
				if !metav1.IsControlledBy(&r, d) {
					continue
				}
				for _, cond := range r.Status.Conditions {
					parts = append(parts, fmt.Sprintf("ReplicaSet %s %s (%s): %s", r.Name, cond.Type, display.Text(cond.Reason), display.Message(cond.Message)))
				}
			}
		}
		parts = append(parts, podTrouble(ctx, c, d)...)
	}
	return strings.Join(parts, "; ")
}

// podsShown bounds how many of a Deployment's pods an error describes.
const podsShown = 3

// podTrouble names the Deployment's pods that are not Ready and the first
// condition that keeps each (unschedulable, not ready, ...).
func podTrouble(ctx context.Context, c client.Client, d *appsv1.Deployment) []string {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && len(out) < podsShown {
				out = append(out, fmt.Sprintf("pod %s %s=%s (%s): %s", p.Name, cond.Type, cond.Status, display.Text(cond.Reason), display.Message(cond.Message)))
				break
			}
		}
	}
	return out
}

// deploymentCondition is the condition typ of d, nil when absent.
func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}
