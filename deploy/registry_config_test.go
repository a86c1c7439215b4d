package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// TestRegistryConfigComponent renders deploy/operator with the
// registry-config component, as a cluster admin's kustomization
// would: the operator gets --registry-config at the mounted Secret's
// config.json, the Secret openfief-registry-config (its .dockerconfigjson
// key) mounted read-only, nothing else changes, no Secret is rendered (the
// cluster admin creates it) and the pod still meets the restricted Pod
// Security Standard.
func TestRegistryConfigComponent(t *testing.T) {
	dir := t.TempDir()
	// kustomize takes relative paths only.
	rel := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, a)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kust := "resources:\n  - " + rel("operator") + "\ncomponents:\n  - " + rel("operator/components/registry-config") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o600); err != nil {
		t.Fatal(err)
	}
	with := renderOperator(t, dir)
	without := renderOperator(t, "operator")

	c := operatorContainer(t, with)
	const flag = "--registry-config=/etc/openfief/registry/config.json"
	if !slices.Contains(c.Args, flag) {
		t.Errorf("args %v lack %s", c.Args, flag)
	}
	if got, want := len(c.Args), len(operatorContainer(t, without).Args)+1; got != want {
		t.Errorf("%d args, want %d (only the flag added)", got, want)
	}
	if slices.Contains(operatorContainer(t, without).Args, flag) {
		t.Error("deploy/operator alone passes --registry-config")
	}
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == "registry-config" {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || mount.MountPath != "/etc/openfief/registry" || !mount.ReadOnly || mount.SubPath != "" {
		t.Errorf("registry-config mount = %+v, want /etc/openfief/registry read-only, no subPath (so a rotated Secret reaches the file)", mount)
	}
	var vol *corev1.Volume
	for i := range with.Spec.Template.Spec.Volumes {
		if with.Spec.Template.Spec.Volumes[i].Name == "registry-config" {
			vol = &with.Spec.Template.Spec.Volumes[i]
		}
	}
	switch {
	case vol == nil || vol.Secret == nil:
		t.Fatalf("registry-config volume = %+v, want a Secret volume", vol)
	case vol.Secret.SecretName != "openfief-registry-config":
		t.Errorf("secretName %q, want openfief-registry-config", vol.Secret.SecretName)
	case len(vol.Secret.Items) != 1 || vol.Secret.Items[0].Key != ".dockerconfigjson" || vol.Secret.Items[0].Path != "config.json":
		t.Errorf("items %+v, want .dockerconfigjson -> config.json", vol.Secret.Items)
	case vol.Secret.Optional != nil && *vol.Secret.Optional:
		t.Error("the Secret is optional: without it the operator would refuse to start on a missing file")
	}
	if len(with.Spec.Template.Spec.Volumes) != len(without.Spec.Template.Spec.Volumes)+1 {
		t.Errorf("volumes %d, want one more than %d", len(with.Spec.Template.Spec.Volumes), len(without.Spec.Template.Spec.Volumes))
	}
	if err := restrictedPSS(with.Spec.Template.Spec); err != "" {
		t.Errorf("the pod no longer meets the restricted Pod Security Standard: %s", err)
	}
	if err := restrictedPSS(without.Spec.Template.Spec); err != "" {
		t.Errorf("deploy/operator's pod does not meet the restricted Pod Security Standard: %s", err)
	}
}

// renderOperator builds the kustomization in dir and returns its operator
// Deployment, checking that it renders no Secret.
func renderOperator(t *testing.T, dir string) *appsv1.Deployment {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var d *appsv1.Deployment
	for _, r := range res.Resources() {
		if r.GetKind() == "Secret" {
			t.Errorf("%s renders Secret %s; the cluster admin creates it", dir, r.GetName())
		}
		if r.GetKind() != "Deployment" || r.GetName() != "openfief-operator" {
			continue
		}
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		d = &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict(raw, d); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
	}
	if d == nil {
		t.Fatalf("%s renders no Deployment openfief-operator", dir)
	}
	return d
}

func operatorContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "operator" {
		t.Fatalf("containers %v, want one named operator", cs)
	}
	return cs[0]
}

// restrictedPSS checks a pod spec against the restricted Pod Security
// Standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
// and returns what it violates, or "".
func restrictedPSS(p corev1.PodSpec) string {
	if p.HostNetwork || p.HostPID || p.HostIPC {
		return "host namespaces"
	}
	for _, v := range p.Volumes {
		s := v.VolumeSource
		if s.ConfigMap == nil && s.CSI == nil && s.DownwardAPI == nil && s.EmptyDir == nil && s.Ephemeral == nil &&
			s.PersistentVolumeClaim == nil && s.Projected == nil && s.Secret == nil {
			return "volume " + v.Name + " of a type restricted does not allow"
		}
	}
	psc := p.SecurityContext
	podNonRoot := psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	podSeccomp := psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	if psc != nil && psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		return "pod runs as user 0"
	}
	for _, c := range slices.Concat(p.InitContainers, p.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			return c.Name + ": no securityContext"
		}
		if sc.Privileged != nil && *sc.Privileged {
			return c.Name + ": privileged"
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			return c.Name + ": allowPrivilegeEscalation not false"
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			return c.Name + ": capabilities not dropping ALL"
		}
		for _, a := range sc.Capabilities.Add {
			if a != "NET_BIND_SERVICE" {
				return c.Name + ": adds capability " + string(a)
			}
		}
		if !podNonRoot && (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) {
			return c.Name + ": runAsNonRoot not true"
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			return c.Name + ": runs as user 0"
		}
		if !podSeccomp && (sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) {
			return c.Name + ": seccomp not RuntimeDefault"
		}
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				return c.Name + ": hostPort"
			}
		}
	}
	return ""
}
