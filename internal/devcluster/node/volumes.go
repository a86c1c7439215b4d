package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Pre-made volumes (Options.Volumes): instead of a storage provisioner, the
// real node offers a fixed number of PersistentVolumes of no class, each a
// folder in its state folder, so a claim of no class (deploy/core's) binds
// as on a cluster with storage. They go with the state folder when the node
// stops: what is written lives as long as the cluster.
const (
	// VolumeCapacity is the capacity of each pre-made PersistentVolume.
	VolumeCapacity = "10Gi"
	// volumePrefix names the PersistentVolumes: openfief-node-pv-0, ...
	volumePrefix = "openfief-node-pv-"
)

// makeVolumes creates count hostPath PersistentVolumes, ReadWriteOnce,
// reclaim policy Retain, each backed by a folder of the state folder that
// any user may write (the pods run as non-root users the node does not
// know in advance; the folder's parents are root's alone, and the pod sees
// only the folder).
func (n *Node) makeVolumes(ctx context.Context, count int) error {
	cs := n.cp.Clientset
	for i := range count {
		name := fmt.Sprintf("%s%d", volumePrefix, i)
		dir := filepath.Join(n.layout.volumes, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
		// MkdirAll's mode is cut by the umask; the sticky bit keeps one
		// writer's files from another's.
		if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(VolumeCapacity)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
				},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("devcluster: PersistentVolume %s: %w", name, err)
		}
	}
	return nil
}

// VolumeDir returns the folder on the machine behind the pre-made
// PersistentVolume name.
func (n *Node) VolumeDir(name string) string {
	return filepath.Join(n.layout.volumes, name)
}
