package operator

import (
	appsv1 "k8s.io/api/apps/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// A platform upgrade names a new isolation gate image: each release pins
// its own check probe, whose digest changes with the release's version. Put
// into every running plugin's pod template, it would restart every plugin on
// every upgrade, although the plugin and its grant did not change. So a
// running Deployment keeps the gate it runs when that gate alone differs
// from what this operator would apply; the next rollout for any other reason
// (a new version, a changed grant or config) takes the operator's gate
// (OF-59).

// keepRunningGate returns the objects to apply for a plugin whose Deployment
// is current (nil when there is none): want, built with the operator's gate,
// unless current runs another gate image of the same repository and the
// objects built with that image are exactly what current holds, in which
// case those objects (so nothing is written and nothing restarts). holds
// compares the operator's own applied fields by digest, so a gate image
// another field manager set is never kept: the operator's apply owns the
// image it keeps. build builds the objects with a given gate.
func keepRunningGate(current *appsv1.Deployment, gate IsolationGate, want Objects, build func(IsolationGate) Objects) Objects {
	if current == nil || gate.Disabled {
		return want
	}
	running := runningGateImage(current)
	if running == "" || running == gate.Image || !sameRepository(running, gate.Image) || holds(current, want.Deployment) {
		return want
	}
	g := gate
	g.Image = running
	kept := build(g)
	if !holds(current, kept.Deployment) {
		return want
	}
	return kept
}

// runningGateImage is the image of d's isolation gate container, "" when it
// has none.
func runningGateImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == plugins.GateContainerName {
			return c.Image
		}
	}
	return ""
}

// sameRepository reports whether a and b are references by digest into one
// registry's one repository: a gate kept across an upgrade is the same
// probe, released again, never another image.
func sameRepository(a, b string) bool {
	ra, err := plugins.ParseImageRef(a)
	if err != nil {
		return false
	}
	rb, err := plugins.ParseImageRef(b)
	if err != nil {
		return false
	}
	return ra.Registry() == rb.Registry() && ra.Repository() == rb.Repository()
}
