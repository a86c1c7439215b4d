//go:build cluster

package apiversions

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// reshaped is the version the webhook test moves PluginGrant to: the
// shipped schema with one field changed in shape, as a stable version might
// change it. spec.imagePullSecrets is a list of names in v1alpha1 and a
// list of {name} objects in reshaped, as a Pod's is, so a later version
// could add to each entry without another change of shape. None cannot
// convert that: only a webhook can.
const reshaped = "v1"

// maxReview bounds the body of one ConversionReview the webhook reads.
const maxReview = 8 << 20

// reshapedGrantVersion returns the shipped PluginGrant version renamed to
// reshaped, with spec.imagePullSecrets' items objects of one field, name,
// whose rules are the shipped items' rules.
func reshapedGrantVersion(shipped apiextensionsv1.CustomResourceDefinitionVersion) (apiextensionsv1.CustomResourceDefinitionVersion, error) {
	v := *shipped.DeepCopy()
	v.Name = reshaped
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	ips, ok := spec.Properties["imagePullSecrets"]
	if !ok || ips.Items == nil || ips.Items.Schema == nil || ips.Items.Schema.Type != "string" {
		return v, errors.New("the shipped PluginGrant has no spec.imagePullSecrets list of strings to reshape")
	}
	name := *ips.Items.Schema
	ips.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
		Type:       "object",
		Required:   []string{"name"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": name},
	}}
	mapType := "map"
	ips.XListType = &mapType
	ips.XListMapKeys = []string{"name"}
	spec.Properties["imagePullSecrets"] = ips
	v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	return v, nil
}

// convertGrant converts one PluginGrant, as JSON, to the apiVersion
// desired: between v1alpha1 and reshaped it changes only
// spec.imagePullSecrets' shape and apiVersion, so a round trip is the
// identity. It refuses anything it could not convert without loss, and the
// API server then fails the request instead of serving a changed object.
func convertGrant(raw []byte, desired string) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	if kind, _ := obj["kind"].(string); kind != "PluginGrant" {
		return nil, fmt.Errorf("kind %q: only PluginGrant converts", kind)
	}
	from, _ := obj["apiVersion"].(string)
	versions := map[string]bool{group + "/" + current: true, group + "/" + reshaped: true}
	if !versions[from] || !versions[desired] {
		return nil, fmt.Errorf("apiVersion %q to %q: only %s/%s and %s/%s convert", from, desired, group, current, group, reshaped)
	}
	obj["apiVersion"] = desired
	if spec, ok := obj["spec"].(map[string]any); ok && from != desired {
		if list, ok := spec["imagePullSecrets"].([]any); ok {
			out := make([]any, len(list))
			for i, item := range list {
				switch desired {
				case group + "/" + reshaped:
					name, ok := item.(string)
					if !ok {
						return nil, fmt.Errorf("spec.imagePullSecrets[%d]: a name must be a string", i)
					}
					out[i] = map[string]any{"name": name}
				default:
					entry, ok := item.(map[string]any)
					name, named := entry["name"].(string)
					if !ok || !named || len(entry) != 1 {
						return nil, fmt.Errorf("spec.imagePullSecrets[%d]: must be an object with only a name to convert to %s", i, current)
					}
					out[i] = name
				}
			}
			spec["imagePullSecrets"] = out
		}
	}
	return json.Marshal(obj)
}

// converter is the conversion webhook the test serves: each
// ConversionReview's objects through convertGrant, all or none.
type converter struct {
	// calls counts the reviews answered, so the test sees that the API
	// server asked.
	calls atomic.Int64
}

// ServeHTTP answers one ConversionReview (apiextensions.k8s.io/v1).
func (c *converter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a ConversionReview", http.StatusMethodNotAllowed)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxReview)).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "the body is not a ConversionReview with a request", http.StatusBadRequest)
		return
	}
	c.calls.Add(1)
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for i, in := range review.Request.Objects {
		out, err := convertGrant(in.Raw, review.Request.DesiredAPIVersion)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("object %d: %v", i, err)}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}
