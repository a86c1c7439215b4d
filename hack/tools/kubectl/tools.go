//go:build tools

// Package tools records the kubectl this module pins (built by
// hack/build-controlplane.sh), so that `go mod tidy` keeps it and the
// packages it needs in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
)
