//go:build tools

// Package tools records the containerd commands this module pins (built by
// hack/build-node.sh), so that `go mod tidy` keeps what they need.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
