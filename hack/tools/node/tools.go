//go:build tools

// Package tools records the node components this module pins (kubelet and
// kube-proxy, built by hack/build-node.sh), so that `go mod tidy` keeps them
// and the packages they need in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
