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
)

// TestRealNodeVolumes, on the shared real node with one pre-made volume
// (the only test to claim it): a claim of no class, as deploy/core's, binds
// to it; a non-root pod under the restricted Pod Security Standard writes
// to it and the file is in the volume's folder on the machine. Stop removes
// it with the state folder (TestMain's leftovers check).
func TestRealNodeVolumes(t *testing.T) {
	t.Parallel() // a namespace of its own on the shared node (main_test.go)
	start := time.Now()
	c, cs, image, ns := sharedNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvName string
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pvName = got.Spec.VolumeName
		return got.Status.Phase == corev1.ClaimBound, nil
	}); err != nil {
		t.Fatalf("claim not Bound: %v", err)
	}
	t.Logf("claim bound to %s", pvName)

	pod := restrictedPod(ns, "writer", image)
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
	}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	createPodWhenAdmitted(ctx, t, cs, pod)
	runningPod(ctx, t, cs, ns, "writer")
	if out := strings.TrimSpace(execIn(ctx, t, c, cs, ns, "writer", "/probe", "write", "/data")); out != "wrote 17 bytes" {
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
