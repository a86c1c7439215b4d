package testutil

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Refusal is one request the API server answered 403 Forbidden, with the API
// group and resource its path names ("" when the path names none).
type Refusal struct {
	Method, Path    string
	Group, Resource string
}

func (r Refusal) String() string {
	if r.Resource == "" {
		return r.Method + " " + r.Path
	}
	return fmt.Sprintf("%s %s (%s in group %q)", r.Method, r.Path, r.Resource, r.Group)
}

// Refusals is an http.RoundTripper that records every request Next answers
// with 403 Forbidden: wrap a rest.Config with it to see what an identity's
// RBAC refuses.
type Refusals struct {
	// Next sends the requests.
	Next http.RoundTripper

	mu   sync.Mutex
	seen []Refusal
}

// RoundTrip implements http.RoundTripper.
func (r *Refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.Next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		group, resource := ResourceOf(req.URL.Path)
		r.mu.Lock()
		r.seen = append(r.seen, Refusal{Method: req.Method, Path: req.URL.Path, Group: group, Resource: resource})
		r.mu.Unlock()
	}
	return resp, err
}

// List returns the refusals so far.
func (r *Refusals) List() []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// Of returns the refusals of requests for a resource rule names.
func (r *Refusals) Of(rule rbacv1.PolicyRule) []Refusal {
	var out []Refusal
	for _, f := range r.List() {
		if f.Resource != "" && slices.Contains(rule.APIGroups, f.Group) && slices.Contains(rule.Resources, f.Resource) {
			out = append(out, f)
		}
	}
	return out
}

// ResourceOf reads the API group and resource of a request path:
// /api/v1/... or /apis/<group>/<version>/..., then namespaces/<ns>/ for a
// namespaced resource, and /<name>/<subresource> as "resource/subresource".
func ResourceOf(path string) (group, resource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	return group, resource
}
