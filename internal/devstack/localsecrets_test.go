package devstack

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestSecretMounts reads the Secret volumes of pod specs shaped like the
// operator's, and refuses those the runner could not project as the
// kubelet would.
func TestSecretMounts(t *testing.T) {
	spec := func(vols []corev1.Volume, mounts []corev1.VolumeMount) corev1.PodSpec {
		return corev1.PodSpec{Volumes: vols, Containers: []corev1.Container{{Name: "plugin", VolumeMounts: mounts}}}
	}
	secretVol := func(name, secret string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
	}
	mount := func(name, path string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
	}
	tmp := corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	withItems := secretVol("secret-0", "creds")
	withItems.Secret.Items = []corev1.KeyToPath{{Key: "password", Path: "p"}}
	optional := secretVol("secret-0", "creds")
	optional.Secret.Optional = ptr.To(true)

	tests := map[string]struct {
		spec    corev1.PodSpec
		want    []secretMount
		wantErr string
	}{
		"no Secret": {spec: spec([]corev1.Volume{tmp}, []corev1.VolumeMount{mount("tmp", "/tmp")})},
		"two, sorted by mount path": {
			spec: spec([]corev1.Volume{secretVol("secret-0", "zeta"), tmp, secretVol("secret-1", "alpha")},
				[]corev1.VolumeMount{mount("secret-0", "/etc/openfief/z"), mount("tmp", "/tmp"), mount("secret-1", "/etc/openfief/a")}),
			want: []secretMount{{secret: "alpha", mountPath: "/etc/openfief/a"}, {secret: "zeta", mountPath: "/etc/openfief/z"}},
		},
		"items":       {spec: spec([]corev1.Volume{withItems}, []corev1.VolumeMount{mount("secret-0", "/etc/x")}), wantErr: "items or optional"},
		"optional":    {spec: spec([]corev1.Volume{optional}, []corev1.VolumeMount{mount("secret-0", "/etc/x")}), wantErr: "items or optional"},
		"not mounted": {spec: spec([]corev1.Volume{secretVol("secret-0", "creds")}, nil), wantErr: "does not mount it"},
		"sub-path": {spec: spec([]corev1.Volume{secretVol("secret-0", "creds")},
			[]corev1.VolumeMount{{Name: "secret-0", MountPath: "/etc/x", SubPath: "password"}}), wantErr: "sub-path"},
		"relative path":  {spec: spec([]corev1.Volume{secretVol("secret-0", "creds")}, []corev1.VolumeMount{mount("secret-0", "etc/x")}), wantErr: "not an absolute, clean path"},
		"unclean path":   {spec: spec([]corev1.Volume{secretVol("secret-0", "creds")}, []corev1.VolumeMount{mount("secret-0", "/etc/../x")}), wantErr: "not an absolute, clean path"},
		"the root":       {spec: spec([]corev1.Volume{secretVol("secret-0", "creds")}, []corev1.VolumeMount{mount("secret-0", "/")}), wantErr: "not an absolute, clean path"},
		"two containers": {spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}, wantErr: "2 containers"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := secretMounts(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("secretMounts = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(secretMount{})); diff != "" {
				t.Errorf("secretMounts (-want +got):\n%s", diff)
			}
		})
	}
}
