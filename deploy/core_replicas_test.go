package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// TestCoreReplicasComponent renders deploy/core alone (one replica on
// SQLite, Recreate) and with components/postgres-replicas, as an admin's
// kustomization would: three replicas rolling one at a time, a
// PodDisruptionBudget, spread across nodes, the pod's name and IP and the
// database from a Secret, no SQLite volume claim, the owner port open
// between the replicas, and the pod still restricted.
func TestCoreReplicasComponent(t *testing.T) {
	dir := t.TempDir()
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
	kust := "resources:\n  - " + rel("core") + "\ncomponents:\n  - " + rel("core/components/postgres-replicas") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o600); err != nil {
		t.Fatal(err)
	}
	one, oneRes := renderCore(t, "core")
	if *one.Spec.Replicas != 1 || one.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("deploy/core: %d replicas, %s; want one replica, Recreate (SQLite)", *one.Spec.Replicas, one.Spec.Strategy.Type)
	}
	if !slices.Contains(one.Spec.Template.Spec.Containers[0].Args, "--database=/var/lib/openfief-core/core.db") {
		t.Error("deploy/core does not run on its SQLite file")
	}
	if !hasPVC(oneRes) {
		t.Error("deploy/core renders no volume claim for SQLite")
	}

	many, res := renderCore(t, dir)
	spec := many.Spec.Template.Spec
	c := spec.Containers[0]
	switch {
	case *many.Spec.Replicas != 3:
		t.Errorf("replicas %d, want 3", *many.Spec.Replicas)
	case many.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || many.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 1:
		t.Errorf("strategy %+v, want RollingUpdate one at a time", many.Spec.Strategy)
	case !slices.Contains(c.Args, "--database=$(OPENFIEF_CORE_DSN)"):
		t.Errorf("args %v, want the database from the Secret", c.Args)
	case len(spec.TopologySpreadConstraints) != 1 || spec.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname":
		t.Errorf("topology spread %+v, want across nodes", spec.TopologySpreadConstraints)
	case spec.Volumes[0].Name != "data" || spec.Volumes[0].EmptyDir == nil:
		t.Errorf("volume %+v, want data as an emptyDir (no SQLite file)", spec.Volumes[0])
	case hasPVC(res):
		t.Error("the volume claim for SQLite is still rendered")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	for k, v := range map[string]string{"POD_NAME": "metadata.name", "POD_IP": "status.podIP", "OPENFIEF_CORE_DSN": "openfief-core-database/dsn", "PGPASSWORD": "openfief-core-database/password"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if why := restrictedPSS(spec); why != "" {
		t.Errorf("with the component the pod breaks the restricted Pod Security Standard: %s", why)
	}
	var pdb, np bool
	for _, r := range res.Resources() {
		switch {
		case r.GetKind() == "Secret":
			t.Errorf("renders Secret %s; the admin creates it", r.GetName())
		case r.GetKind() == "PodDisruptionBudget" && r.GetName() == "openfief-core":
			pdb = true
		case r.GetKind() == "NetworkPolicy" && r.GetName() == "openfief-core":
			raw, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			var p networkingv1.NetworkPolicy
			if err := yaml.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			last := p.Spec.Ingress[len(p.Spec.Ingress)-1]
			np = last.From[0].PodSelector != nil && last.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] == "openfief-core" &&
				last.Ports[0].Port.IntValue() == 8081
		}
	}
	if !pdb {
		t.Error("no PodDisruptionBudget openfief-core")
	}
	if !np {
		t.Error("the NetworkPolicy does not admit the replicas to each other's owner port")
	}
}

// hasPVC tells whether res holds the SQLite volume's claim.
func hasPVC(res resmap.ResMap) bool {
	return slices.ContainsFunc(res.Resources(), func(r *resource.Resource) bool {
		return r.GetKind() == "PersistentVolumeClaim" && r.GetName() == "openfief-core-data"
	})
}

// renderCore renders dir and returns the core's Deployment and everything.
func renderCore(t *testing.T, dir string) (*appsv1.Deployment, resmap.ResMap) {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	for _, r := range res.Resources() {
		if r.GetKind() != "Deployment" || r.GetName() != "openfief-core" {
			continue
		}
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		return &d, res
	}
	t.Fatalf("%s renders no Deployment openfief-core", dir)
	return nil, nil
}
