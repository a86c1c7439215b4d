//go:build cluster

package incluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// testPluginRollback installs nbp-fx, upgrades it to a version asking for
// one more host and approves it, then rolls back with `openfief plugin
// rollback` on the real node: the pod of the first image runs again, the
// core calls it again, `plugin history` lists the three revisions with the
// newest running, and the operator recorded a RolledBack Event. The plugin
// is uninstalled when the phase ends, passed or failed.
func testPluginRollback(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	const instance = "fx-rollback"
	t.Cleanup(func() { uninstallPlugins(t, e, []string{instance}) })
	v1 := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM())
	v2 := e.preg.publishNBPFx(t, e.root, e.signer, e.nbp.CAPEM(), "static.nbp.pl")
	trust := []string{"--signers", e.signersFile, "--insecure-registry", e.preg.bridge}
	openfief(t, e.kubeconfig, append([]string{"plugin", "install", instance, "--image", v1.String()}, trust...)...)
	openfief(t, e.kubeconfig, "plugin", "approve", instance, "--yes")
	openfief(t, e.kubeconfig, "plugin", "wait", instance, "--for", "Running", "--timeout", "3m")
	runsImage(t, e, instance, v1.String())
	openfief(t, e.kubeconfig, append([]string{"plugin", "upgrade", instance, "--image", v2.String()}, trust...)...)
	openfief(t, e.kubeconfig, "plugin", "approve", instance, "--yes")
	runsImage(t, e, instance, v2.String())

	start := time.Now()
	out := openfief(t, e.kubeconfig, append([]string{"plugin", "rollback", instance}, trust...)...)
	if !strings.Contains(out, "rolled back to revision 1") {
		t.Errorf("rollback said:\n%s", out)
	}
	runsImage(t, e, instance, v1.String())
	openfief(t, e.kubeconfig, "plugin", "wait", instance, "--for", "Running", "--timeout", "3m")
	t.Logf("rolled back: %s runs again %s after the rollback", v1, time.Since(start).Round(100*time.Millisecond))
	waitCalled(t, e, instance, start)

	var history struct {
		Running string `json:"running"`
		Items   []struct {
			Revision int64  `json:"revision"`
			Image    string `json:"image"`
			Running  bool   `json:"running"`
		} `json:"items"`
	}
	testutil.Eventually(t, time.Minute, "three revisions in the history", func() (bool, string) {
		must(t, json.Unmarshal([]byte(openfief(t, e.kubeconfig, "plugin", "history", instance, "-o", "json")), &history))
		h := history.Items
		return len(h) == 3 && h[0].Revision == 3 && h[0].Image == v1.String() && h[0].Running &&
			h[1].Image == v2.String() && h[2].Image == v1.String(), fmt.Sprintf("%+v", h)
	})
	openfief(t, e.kubeconfig, "plugin", "history", instance)

	testutil.Eventually(t, time.Minute, "a RolledBack Event", func() (bool, string) {
		list, err := e.cs.EventsV1().Events(plugins.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Plugin" && ev.Regarding.Name == instance && ev.Reason == "RolledBack" {
				t.Logf("Event %s: %s", ev.Reason, ev.Note)
				return strings.Contains(ev.Note, "revision 1") && strings.Contains(ev.Note, v1.String()), ev.Note
			}
		}
		return false, "none"
	})
}

// runsImage waits until the plugin's one pod runs image.
func runsImage(t *testing.T, e *platformEnv, name, image string) {
	t.Helper()
	testutil.Eventually(t, 3*time.Minute, name+" running "+image, func() (bool, string) {
		pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: plugins.LabelPluginName + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		var images []string
		for _, p := range pods.Items {
			images = append(images, p.Spec.Containers[0].Image+" "+string(p.Status.Phase))
		}
		return len(pods.Items) == 1 && pods.Items[0].Spec.Containers[0].Image == image && pods.Items[0].Status.Phase == corev1.PodRunning, fmt.Sprint(images)
	})
}
