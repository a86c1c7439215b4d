package devstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// secretMount is one Secret a plugin's pod mounts, and where.
type secretMount struct {
	secret, mountPath string
}

// secretMounts reads the Secrets the pod spec mounts into its one
// container, sorted by mount path: the Secret volumes the operator writes
// for the granted slots (one per slot, the whole Secret, read-only). A
// Secret volume the runner could not project as the kubelet would (chosen
// items, an optional Secret, no mount or a mount of part of it, a mount
// path that is not absolute and clean) is refused rather than projected
// differently.
func secretMounts(spec corev1.PodSpec) ([]secretMount, error) {
	if len(spec.Containers) != 1 {
		return nil, fmt.Errorf("the pod has %d containers, want 1", len(spec.Containers))
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	var out []secretMount
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		src := v.Secret
		m, ok := mounts[v.Name]
		switch {
		case len(src.Items) > 0 || (src.Optional != nil && *src.Optional):
			return nil, fmt.Errorf("volume %s: a Secret volume with items or optional is not what the operator writes", v.Name)
		case !ok:
			return nil, fmt.Errorf("volume %s: the container does not mount it", v.Name)
		case m.SubPath != "" || m.SubPathExpr != "":
			return nil, fmt.Errorf("volume %s: mounted with a sub-path", v.Name)
		case !filepath.IsAbs(m.MountPath) || filepath.Clean(m.MountPath) != m.MountPath || m.MountPath == "/":
			return nil, fmt.Errorf("volume %s: mount path %q is not an absolute, clean path below /", v.Name, m.MountPath)
		}
		out = append(out, secretMount{secret: src.SecretName, mountPath: m.MountPath})
	}
	slices.SortFunc(out, func(a, b secretMount) int { return strings.Compare(a.mountPath, b.mountPath) })
	return out, nil
}

// projectSecrets writes the Secrets spec mounts under root, each key a file
// (0600) in root joined with its mount path, as the kubelet projects a
// Secret volume into a pod; what root held before is removed first, so a
// Secret no longer granted leaves nothing behind. A Secret that does not
// exist fails the start, as it keeps a pod from starting; the runner tries
// again on its next pass. Keys are the API server's (letters, digits, '-',
// '_', '.'); one that would leave its directory is refused all the same.
// Nothing of a Secret's content is logged or put into an error.
func projectSecrets(ctx context.Context, cs kubernetes.Interface, spec corev1.PodSpec, root string) error {
	mounts, err := secretMounts(spec)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	for _, m := range mounts {
		sec, err := cs.CoreV1().Secrets(plugins.Namespace).Get(ctx, m.secret, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the Secret %s mounted at %s: %w", m.secret, m.mountPath, err)
		}
		dir := filepath.Join(root, m.mountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		for key, value := range sec.Data {
			if !filepath.IsLocal(key) || strings.ContainsRune(key, '/') {
				return fmt.Errorf("the Secret %s: key %q is not a file name", m.secret, key)
			}
			if err := os.WriteFile(filepath.Join(dir, key), value, 0o600); err != nil {
				return fmt.Errorf("the Secret %s: writing key %s: %w", m.secret, key, err)
			}
		}
	}
	return nil
}
