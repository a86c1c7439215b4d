//go:build cluster

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/devstack"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// rolloutPlugins is how many plugins TestApprovalRollsOutOnceOnRealNode
// approves at once.
const rolloutPlugins = 6

// settleWindow is how long TestApprovalRollsOutOnceOnRealNode watches the
// plugins after every one of them has rolled out and reported it: a second
// rollout is an absence to prove, so it is watched for, not waited on.
const settleWindow = 15 * time.Second

// TestApprovalRollsOutOnceOnRealNode approves several plugins at once on the
// real node, where kube-controller-manager's Deployment controller turns
// every change of a pod template into a ReplicaSet, and checks that each
// plugin's first rollout is its only one: once every pod runs and every
// RolledOut Event is recorded, and for settleWindow after, each plugin's
// Deployment is at generation 1 with exactly one ReplicaSet, its pod is the
// first one, and it has exactly one RolledOut Event. A pod template the
// operator changed right after approval (a late annotation, a record or a
// hash written in a second pass) shows here as a second ReplicaSet.
func TestApprovalRollsOutOnceOnRealNode(t *testing.T) {
	stack, _ := platform(t)
	// Beside the package's other parallel tests (main_test.go says which).
	t.Parallel()
	cs, err := kubernetes.NewForConfig(stack.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ref := publishProbe(t, stack, "plugins/rollout-probe")
	names := make([]string, rolloutPlugins)
	for i := range names {
		names[i] = fmt.Sprintf("rollout-%d", i)
		openfief(t, stack, "plugin", "install", names[i], "--image", ref, "--signers", stack.SignersFile)
	}
	// All approved before any runs, so their first passes overlap.
	for _, n := range names {
		openfief(t, stack, "plugin", "approve", n, "--yes")
	}
	start := time.Now()
	first := map[string]string{}
	for _, n := range names {
		first[n] = string(runningPod(t, cs, n).UID)
	}
	t.Logf("%d plugin pods Running %v after the last approval", len(names), time.Since(start).Round(time.Millisecond))
	// Events are written asynchronously: wait until each plugin's first
	// RolledOut is in the API.
	testutil.Eventually(t, time.Minute, "a RolledOut Event for every plugin", func() (bool, string) {
		counts := rolledOutEvents(t, cs)
		for _, n := range names {
			if counts[n] == 0 {
				return false, fmt.Sprintf("%v", counts)
			}
		}
		return true, ""
	})

	deadline := time.Now().Add(settleWindow)
	for checks := 0; ; checks++ {
		problems := rolloutProblems(t, cs, names, first)
		if len(problems) > 0 {
			t.Fatalf("after %d checks over %v:\n%s", checks, time.Since(start).Round(time.Millisecond), strings.Join(problems, "\n"))
		}
		if time.Now().After(deadline) {
			t.Logf("%d checks over %v: every plugin rolled out once, one ReplicaSet and one RolledOut each", checks+1, settleWindow)
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(500 * time.Millisecond):
		}
	}

	for _, n := range names {
		openfief(t, stack, "plugin", "uninstall", n, "--yes", "--purge", "--wait", "60s")
	}
	for _, n := range names {
		podGone(t, cs, n)
	}
}

// rolloutProblems lists, for each plugin, what is not a single first
// rollout: a Deployment past generation 1, other than one ReplicaSet owned
// by it, a pod other than the first, other than one RolledOut Event.
func rolloutProblems(t *testing.T, cs kubernetes.Interface, names []string, first map[string]string) []string {
	t.Helper()
	ctx := t.Context()
	sets, err := cs.AppsV1().ReplicaSets(plugins.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events := rolledOutEvents(t, cs)
	var problems []string
	for _, n := range names {
		d, err := cs.AppsV1().Deployments(plugins.Namespace).Get(ctx, plugins.ServiceAccountName(n), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != 1 {
			problems = append(problems, fmt.Sprintf("%s: Deployment at generation %d, want 1 (its spec changed after the first apply)", n, d.Generation))
		}
		if owned := ownedBy(sets.Items, d); len(owned) != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d ReplicaSets %v, want 1", n, len(owned), owned))
		}
		if got := events[n]; got != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d RolledOut Events, want 1", n, got))
		}
		if pod := runningPod(t, cs, n); string(pod.UID) != first[n] {
			problems = append(problems, fmt.Sprintf("%s: its pod was replaced by %s", n, pod.Name))
		}
	}
	return problems
}

// ownedBy names the ReplicaSets d controls, sorted.
func ownedBy(sets []appsv1.ReplicaSet, d *appsv1.Deployment) []string {
	var out []string
	for _, rs := range sets {
		if c := metav1.GetControllerOf(&rs); c != nil && c.UID == d.UID {
			out = append(out, rs.Name)
		}
	}
	slices.Sort(out)
	return out
}

// rolledOutEvents counts the RolledOut Events the operator recorded per
// Plugin, each series counted by its occurrences.
func rolledOutEvents(t *testing.T, cs kubernetes.Interface) map[string]int {
	t.Helper()
	list, err := cs.EventsV1().Events(plugins.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range list.Items {
		if e.Reason != operator.EventRolledOut || e.Regarding.Kind != "Plugin" || e.ReportingController != operator.EventReportingController {
			continue
		}
		counts[e.Regarding.Name] += occurrences(e)
	}
	return counts
}

// occurrences is how many times an Event happened: once, or its series' count.
func occurrences(e eventsv1.Event) int {
	if e.Series != nil && e.Series.Count > 1 {
		return int(e.Series.Count)
	}
	return 1
}

// publishProbe publishes the probe under nbp-fx's manifest to repo and
// returns its reference.
func publishProbe(t *testing.T, stack *devstack.Stack, repo string) string {
	t.Helper()
	return publishProbeAs(t, stack, repo, filepath.Join("plugins", "nbp-fx", "manifest.json"))
}

// publishProbeAs publishes the probe (internal/devcluster/testdata/probe, as
// /plugin) under the manifest.json at manifestFile (relative to the
// repository) to repo, signed by the owner, and returns its reference.
func publishProbeAs(t *testing.T, stack *devstack.Stack, repo, manifestFile string) string {
	t.Helper()
	manifestJSON, err := os.ReadFile(filepath.Join(repoRoot(t), manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := plugins.ParseManifestLabel(string(manifestJSON))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ref, err := stack.PublishImage(ctx, repo, manifest, map[string][]byte{"plugin": buildStatic(t, "./internal/devcluster/testdata/probe")})
	if err != nil {
		t.Fatal(err)
	}
	return ref.String()
}
