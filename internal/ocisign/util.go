package ocisign

import (
	"bytes"
	"io"
	"net"
	"strings"
)

type ioReadCloser = io.ReadCloser

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// isLoopback reports whether a registry host[:port] is on this machine.
func isLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
