//go:build cluster

package devcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestRealNodeVolumes starts a real node with one pre-made volume: a claim
// of no class, as deploy/core's, binds to it; a non-root pod under the
// restricted Pod Security Standard writes to it and the file is in the
// volume's folder on the machine; Stop removes it with the state folder.
func TestRealNodeVolumes(t *testing.T) {
	skipUnlessRealNode(t)
	start := time.Now()
	c, err := devcluster.Start(t.Context(), devcluster.Options{Mode: devcluster.Full, Node: devcluster.NodeReal, Volumes: 1, StartTimeout: 2 * time.Minute, Output: nodeOutput(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		assertNoLeftovers(t)
	})
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	image := pushProbe(t, c.NodeRegistry())
	createProbeNamespace(t, cs)

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "probe"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims("probe").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvName string
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().PersistentVolumeClaims("probe").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pvName = got.Spec.VolumeName
		return got.Status.Phase == corev1.ClaimBound, nil
	}); err != nil {
		t.Fatalf("claim not Bound: %v", err)
	}
	t.Logf("claim bound to %s", pvName)

	pod := restrictedPod("writer", image)
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
	}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	createPodWhenAdmitted(ctx, t, cs, pod)
	runningPod(ctx, t, cs, "probe", "writer")
	if out := strings.TrimSpace(execIn(ctx, t, c, cs, "probe", "writer", "/probe", "write", "/data")); out != "wrote 17 bytes" {
		t.Fatalf("probe write /data printed %q; want %q", out, "wrote 17 bytes")
	}
	onHost, err := os.ReadFile(filepath.Join(c.VolumeDir(pvName), "probe-data"))
	if err != nil {
		t.Fatal(err)
	}
	if string(onHost) != "probe wrote here\n" {
		t.Errorf("the volume's folder holds %q; want what the pod wrote", onHost)
	}
	t.Logf("node, claim, pod and write in %v", time.Since(start).Round(time.Millisecond))
}
