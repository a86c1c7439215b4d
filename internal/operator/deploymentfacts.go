package operator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// deploymentFacts is what the Plugin reconciler reads of a plugin's
// Deployment besides whether it holds what the operator applies: who
// controls it, the record of the version it runs, its images, whether it is
// scaled to zero and whether it is available. The operator remembers these
// per Deployment and resource version (ownedObjects) instead of caching the
// Deployment itself.
type deploymentFacts struct {
	// controllerUID and controllerKind name its controller (the owner
	// reference with controller true); empty without one.
	controllerUID  types.UID
	controllerKind string
	// serviceAccount is its pods' ServiceAccount.
	serviceAccount string
	// record is AnnotationVerifiedVersion on its pod template; hasRecord
	// says whether the annotation is there at all.
	record    string
	hasRecord bool
	// image is the plugin container's image, gate the isolation gate's;
	// "" without one.
	image, gate string
	// scaledToZero says spec.replicas is 0.
	scaledToZero bool
	// available is deploymentAvailable's answer.
	available bool
}

// factsOf reads d's facts.
func factsOf(d *appsv1.Deployment) *deploymentFacts {
	f := &deploymentFacts{
		serviceAccount: intern(d.Spec.Template.Spec.ServiceAccountName),
		image:          runningImage(d),
		gate:           runningGateImage(d),
		scaledToZero:   d.Spec.Replicas != nil && *d.Spec.Replicas == 0,
		available:      deploymentAvailable(d),
	}
	if owner := metav1.GetControllerOfNoCopy(d); owner != nil {
		f.controllerUID, f.controllerKind = owner.UID, intern(owner.Kind)
	}
	f.record, f.hasRecord = d.Spec.Template.Annotations[AnnotationVerifiedVersion]
	return f
}

// verifiedVersion returns the record on the plugin's Deployment, as
// readVerifiedVersion says: (nil, nil) when the Deployment is not the
// operator's for p; errNoRecord when it is but has no record; an error for
// a malformed record or one naming another image than the one that runs.
func (f *deploymentFacts) verifiedVersion(p *v1alpha1.Plugin) (*v1alpha1.DeployedVersion, error) {
	if f.controllerUID == "" || f.controllerUID != p.UID || f.controllerKind != "Plugin" {
		return nil, nil
	}
	if f.serviceAccount != plugins.ServiceAccountName(p.Name) {
		return nil, nil
	}
	if !f.hasRecord {
		return nil, errNoRecord
	}
	rec, err := decodeVerifiedVersion(f.record)
	if err != nil {
		return nil, err
	}
	if f.image != rec.Image {
		return nil, fmt.Errorf("it names %s, but %s runs", rec.Image, f.image)
	}
	return rec, nil
}

// deploymentAvailable reports whether the Deployment controller has seen the
// latest spec and reports it Available with its one replica updated.
func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < 1 {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
