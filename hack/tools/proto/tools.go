//go:build tools

// Package tools pins buf and the protoc plugins that generate the connector
// contract's Go code (D-11), so hack/proto.sh builds them offline from the Go
// module proxy's cache and a fresh machine needs nothing but Go.
package tools

import (
	_ "connectrpc.com/connect/cmd/protoc-gen-connect-go"
	_ "github.com/bufbuild/buf/cmd/buf"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
