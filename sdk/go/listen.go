// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
)

// EnvListenFD names the variable that, when set, holds the number of an
// inherited file descriptor: a TCP socket on loopback, already listening,
// which the plugin serves the core on instead of listening itself. Only a
// runner that starts the plugin outside a pod sets it (`openfief dev
// --local-plugins`): it opens the listener, keeps its own copy open for as
// long as the core may call the plugin, and hands it down, so no other
// process of the machine can take the port between the runner's choice of
// it and the plugin's first accept, nor while the plugin is down. The
// operator never sets it, so in a pod the plugin listens on ListenAddress
// as before.
const EnvListenFD = "OPENFIEF_LISTEN_FD"

// Listen returns the listener a plugin serves the core on: the inherited
// one OPENFIEF_LISTEN_FD names, when set, or else a new TCP listener on
// ListenAddress. An inherited descriptor must be a listening TCP socket on
// a loopback address, on the port of OPENFIEF_LISTEN_PORT when that is set;
// anything else is refused, naming the rule, and its descriptor closed.
// Listen unsets OPENFIEF_LISTEN_FD once it has read it, and the listener it
// returns is not inherited by the plugin's own children.
func Listen() (net.Listener, error) {
	s, inherited := os.LookupEnv(EnvListenFD)
	if !inherited {
		addr, err := ListenAddress()
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		return ln, nil
	}
	_ = os.Unsetenv(EnvListenFD)
	fd, err := parseListenFD(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvListenFD, err)
	}
	port := 0
	if p := os.Getenv(EnvListenPort); p != "" {
		if port, err = parsePort(p); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvListenPort, err)
		}
	}
	ln, err := inheritedListener(fd, port)
	if err != nil {
		return nil, fmt.Errorf("%s=%d: %w", EnvListenFD, fd, err)
	}
	return ln, nil
}

// maxListenFD bounds the descriptor number OPENFIEF_LISTEN_FD may name.
const maxListenFD = 1 << 20

// parseListenFD accepts a decimal descriptor number from 3 (the first one
// after standard input, output and error) to maxListenFD, without sign or
// leading zero.
func parseListenFD(s string) (int, error) {
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 3 || fd > maxListenFD || strconv.Itoa(fd) != s {
		return 0, fmt.Errorf("%q is not a file descriptor number from 3 to %d", s, maxListenFD)
	}
	return fd, nil
}

// inheritedListener takes over descriptor fd as a listener: a copy of it
// that is closed on exec, the descriptor itself closed. It must be a
// listening TCP socket on loopback, on port when port is not zero.
func inheritedListener(fd, port int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "openfief-listener")
	if f == nil {
		return nil, errors.New("not a file descriptor")
	}
	ln, err := net.FileListener(f)
	// The listener holds a copy (close-on-exec); the inherited descriptor
	// is closed either way, so the plugin's children never hold it.
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("not a listening socket: %w", err)
	}
	if err := checkInherited(ln, port); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// checkInherited checks that ln is a TCP socket that listens, on a
// loopback address, on port when that is not zero.
func checkInherited(ln net.Listener, port int) error {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return fmt.Errorf("a %s socket, not TCP", ln.Addr().Network())
	}
	addr, ok := tl.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		return fmt.Errorf("bound to %s, not to a loopback address", tl.Addr())
	}
	if port != 0 && addr.Port != port {
		return fmt.Errorf("bound to port %d, not to the %s %d", addr.Port, EnvListenPort, port)
	}
	listening, err := isListening(tl)
	if err != nil {
		return err
	}
	if !listening {
		return errors.New("a TCP socket that does not listen")
	}
	return nil
}
