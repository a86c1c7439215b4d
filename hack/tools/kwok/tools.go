//go:build tools

// Package tools records the tool packages this module pins, so that
// `go mod tidy` keeps them in go.mod.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
