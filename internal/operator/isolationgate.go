package operator

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// IsolationGate is the init container the operator puts before every
// plugin's container (OF-42): the platform's probe image running
// `/check-probe gate`, which exits only once what a plugin must never reach
// is blocked from inside the pod, so the plugin's first instruction runs
// under its NetworkPolicies whichever network plugin enforces them.
type IsolationGate struct {
	// Image is the platform's probe image by digest
	// (--isolation-gate-image): a release overlay sets it to the check probe
	// it pins.
	Image string
	// Disabled runs plugins without the gate (--isolation-gate=false). It
	// exists to show the window the gate closes; never set it in a cluster
	// that runs plugins holding anything of value.
	Disabled bool
	// Settings are the gate's targets and timing
	// (--isolation-gate-targets, --isolation-gate-timeout,
	// --isolation-gate-deadline).
	Settings plugins.GateSettings
}

// ErrNoIsolationGate is AddToManager's refusal when the operator was given
// no gate image and was not told to run without the gate: it refuses to
// start rather than run plugins unguarded for their first moments.
var ErrNoIsolationGate = errors.New("no isolation gate image: set --isolation-gate-image to the release's check probe image by digest (or --isolation-gate=false to run plugins without the gate, unsafe)")

// Validate refuses a gate without an image, an image not named by digest,
// and settings out of bounds.
func (g IsolationGate) Validate() error {
	if g.Disabled {
		return nil
	}
	if g.Image == "" {
		return ErrNoIsolationGate
	}
	if _, err := plugins.ParseImageRef(g.Image); err != nil {
		return fmt.Errorf("--isolation-gate-image %q: %w", g.Image, err)
	}
	return g.Settings.Validate()
}

// Resources of the gate's container: it holds a few sockets for a moment
// and writes one line of log. Its requests stay below the plugin's own, so
// the pod asks the scheduler and the namespace's quota for no more than
// the plugin does (a pod requests the larger of its init containers' and
// its containers' sum).
var (
	gateCPURequest       = resource.MustParse("10m")
	gateCPULimit         = resource.MustParse("100m")
	gateMemory           = resource.MustParse("32Mi")
	gateEphemeralRequest = resource.MustParse("1Mi")
	gateEphemeralLimit   = resource.MustParse("8Mi")
)

// buildGateContainer is the gate's init container, or nil when it is
// disabled. It runs as hardened as the plugin, with nothing mounted (no
// token, no Secret, no config) and only the node's address in its
// environment: the gate learns nothing the plugin could use, and gives the
// plugin nothing.
func buildGateContainer(g IsolationGate) []corev1.Container {
	if g.Disabled {
		return nil
	}
	return []corev1.Container{{
		Name:    plugins.GateContainerName,
		Image:   g.Image,
		Command: []string{probewire.Binary},
		Args:    g.Settings.Args(),
		Env: []corev1.EnvVar{{Name: plugins.EnvNodeIP, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.hostIP"},
		}}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: gateCPURequest, corev1.ResourceMemory: gateMemory, corev1.ResourceEphemeralStorage: gateEphemeralRequest},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: gateCPULimit, corev1.ResourceMemory: gateMemory, corev1.ResourceEphemeralStorage: gateEphemeralLimit},
		},
		// Its last words name what still answered when isolation never
		// came: the owner sees them in the pod's status.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedContainer(),
	}}
}

// restrictedContainer is the container security context of every
// container in a plugin pod: the restricted Pod Security Standard.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
