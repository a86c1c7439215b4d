// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin

package openfief

import (
	"net"
	"syscall"
)

// isListening reports whether ln's socket accepts connections
// (SO_ACCEPTCONN): a TCP socket that was bound but never listened on is
// refused rather than served.
func isListening(ln *net.TCPListener) (bool, error) {
	raw, err := ln.SyscallConn()
	if err != nil {
		return false, err
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	}); err != nil {
		return false, err
	}
	if serr != nil {
		return false, serr
	}
	return v != 0, nil
}
