//go:build tools

// Package tools records the kube-router command this module pins (built by
// hack/build-node.sh), so that `go mod tidy` keeps what it needs.
package tools

import (
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
)
