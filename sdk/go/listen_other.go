// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package openfief

import (
	"errors"
	"net"
)

// isListening cannot tell here; an inherited listener is refused, since
// only the local runner hands one down, on Linux or macOS.
func isListening(*net.TCPListener) (bool, error) {
	return false, errors.New("an inherited listener is taken on Linux and macOS only")
}
