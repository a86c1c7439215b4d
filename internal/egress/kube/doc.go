// Package kube connects the egress proxy (package egress) to Kubernetes: a
// TokenReviewer on the TokenReview API for the openfief-egress audience
// (D-63), and AllowLists, which follows the openfief-egress-allowlist
// ConfigMap the operator writes and hands the proxy the decoded lists,
// failing closed whenever it cannot read them (D-32).
package kube
