package platform

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Component is one platform Deployment as the cluster shows it.
type Component struct {
	// Name is the Deployment's name.
	Name string
	// Image is the first container's image.
	Image string
	// Version is its LabelVersion.
	Version string
	// Available is its Available condition's status ("True", "False",
	// "Unknown"), with the reason when not True.
	Available string
	// Ready is "<available>/<wanted>" replicas.
	Ready string
}

// Binding is one ValidatingAdmissionPolicyBinding of the platform.
type Binding struct {
	// Name is the binding's name.
	Name string
	// Policy is the policy it binds.
	Policy string
	// Actions are its validationActions (Deny, Warn, Audit).
	Actions string
	// PolicyFound says whether that policy exists.
	PolicyFound bool
}

// Status is the platform as installed: its version, its Deployments and
// its admission policy bindings.
type Status struct {
	// Version is the installed version (InstalledVersion).
	Version string
	// Components are the platform's Deployments, by name.
	Components []Component
	// Bindings are its admission policy bindings, by name.
	Bindings []Binding
}

// ReadStatus reads the platform's state from the command's objects; it
// returns ErrNotInstalled when there are none but the data an uninstall
// keeps.
func ReadStatus(ctx context.Context, c client.Client) (Status, error) {
	owned, err := Owned(ctx, c)
	if err != nil {
		return Status{}, err
	}
	if !Installed(owned) {
		return Status{}, ErrNotInstalled
	}
	st := Status{Version: InstalledVersion(owned)}
	policies := map[string]bool{}
	for _, u := range owned {
		if u.GetKind() == "ValidatingAdmissionPolicy" {
			policies[u.GetName()] = true
		}
	}
	for _, u := range owned {
		switch u.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), &d); err != nil {
				return Status{}, fmt.Errorf("read %s: %w", describe(u), err)
			}
			comp := Component{Name: d.Name, Version: d.Labels[LabelVersion], Available: "Unknown",
				Ready: fmt.Sprintf("%d/%d", d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1))}
			if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
				comp.Image = cs[0].Image
			}
			if cond := deploymentCondition(&d, appsv1.DeploymentAvailable); cond != nil {
				comp.Available = string(cond.Status)
				if cond.Status != "True" && cond.Reason != "" {
					comp.Available += " (" + cond.Reason + ")"
				}
			}
			st.Components = append(st.Components, comp)
		case "ValidatingAdmissionPolicyBinding":
			policy, _, _ := unstructured.NestedString(u.Object, "spec", "policyName")
			actions, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "validationActions")
			st.Bindings = append(st.Bindings, Binding{Name: u.GetName(), Policy: policy, Actions: strings.Join(actions, ","), PolicyFound: policies[policy]})
		}
	}
	return st, nil
}
