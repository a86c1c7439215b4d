package operator

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestBuildObjectsStartsWithTheGate: every plugin pod starts with the
// isolation gate (OF-42), which runs the probe's gate with the operator's
// settings, as hardened as the plugin, with no volume, no token and no
// environment but the node's address; the plugin's container comes after.
// Without the gate, a plugin's first packets leave before its policy is in
// force on the node (TestIsolationFromTheFirstPacket on the real node).
func TestBuildObjectsStartsWithTheGate(t *testing.T) {
	p := testutil.MakePlugin("gated", testutil.Image("gated-1")).Obj()
	w := plugins.Workload{
		Tokens:  []plugins.ProjectedToken{{Audience: plugins.AudienceCore, ExpirationSeconds: 3600}},
		Secrets: []plugins.WorkloadSecret{{SecretName: "bank", MountPath: "/var/run/secrets/bank"}},
	}
	gate := IsolationGate{Image: testutil.GateImage, Settings: plugins.DefaultGateSettings()}
	spec := BuildObjects(p, p.Spec.Image, nil, w, Cluster{Gate: gate}).Deployment.Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		t.Fatalf("init containers: %s", describeJSON(spec.InitContainers))
	}
	g := spec.InitContainers[0]
	wantArgs := append([]string{}, gate.Settings.Args()...)
	if g.Name != plugins.GateContainerName || g.Image != testutil.GateImage ||
		!slices.Equal(g.Command, []string{probewire.Binary}) || !slices.Equal(g.Args, wantArgs) {
		t.Errorf("gate container %s", describeJSON(g))
	}
	if len(g.VolumeMounts) != 0 || len(g.EnvFrom) != 0 || len(g.Env) != 1 || g.Env[0].Name != plugins.EnvNodeIP ||
		g.Env[0].ValueFrom == nil || g.Env[0].ValueFrom.FieldRef == nil || g.Env[0].ValueFrom.FieldRef.FieldPath != "status.hostIP" {
		t.Errorf("the gate is given more than the node's address: %s", describeJSON(g))
	}
	if g.SecurityContext == nil || describeJSON(g.SecurityContext) != describeJSON(restrictedContainer()) {
		t.Errorf("gate security context %s", describeJSON(g.SecurityContext))
	}
	if g.Resources.Limits.Memory().IsZero() || g.Resources.Limits.Cpu().IsZero() {
		t.Errorf("gate without limits: %s", describeJSON(g.Resources))
	}
	if g.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("termination message policy %q", g.TerminationMessagePolicy)
	}
	if len(spec.Containers) != 1 || spec.Containers[0].Name != containerName {
		t.Errorf("containers %s", describeJSON(spec.Containers))
	}

	gate.Disabled = true
	if spec := BuildObjects(p, p.Spec.Image, nil, w, Cluster{Gate: gate}).Deployment.Spec.Template.Spec; len(spec.InitContainers) != 0 {
		t.Errorf("a disabled gate still runs: %s", describeJSON(spec.InitContainers))
	}
}

// TestIsolationGateValidate: the operator refuses to start without a gate
// image unless the gate is disabled, and with a gate image not pinned by
// digest.
func TestIsolationGateValidate(t *testing.T) {
	def := plugins.DefaultGateSettings()
	if err := (IsolationGate{Settings: def}).Validate(); !errors.Is(err, ErrNoIsolationGate) {
		t.Errorf("no image: %v, want ErrNoIsolationGate", err)
	}
	if err := (IsolationGate{Disabled: true}).Validate(); err != nil {
		t.Errorf("disabled: %v", err)
	}
	if err := (IsolationGate{Image: "registry.example.com/openfief/check-probe:latest", Settings: def}).Validate(); err == nil {
		t.Error("a tag was accepted")
	}
	if err := (IsolationGate{Image: testutil.GateImage, Settings: def}).Validate(); err != nil {
		t.Errorf("pinned: %v", err)
	}
	if err := (IsolationGate{Image: testutil.GateImage}).Validate(); err == nil {
		t.Error("no targets accepted")
	}
}
