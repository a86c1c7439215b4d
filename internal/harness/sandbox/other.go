//go:build !linux

package sandbox

import (
	"context"
	"net"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Sandbox is a running sandbox; on this system none can start.
type Sandbox struct{}

// Unpack is Linux only.
func Unpack(context.Context, v1.Image, string, int64) (Config, error) {
	return Config{}, ErrUnsupported
}

// Start is Linux only.
func Start(context.Context, Spec) (*Sandbox, error) { return nil, ErrUnsupported }

// Listen is Linux only.
func (*Sandbox) Listen(string, string) (net.Listener, error) { return nil, ErrUnsupported }

// DialContext is Linux only.
func (*Sandbox) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, ErrUnsupported
}

// Attempts is Linux only.
func (*Sandbox) Attempts() []Attempt { return nil }

// Signal is Linux only.
func (*Sandbox) Signal(os.Signal) error { return ErrUnsupported }

// Wait is Linux only.
func (*Sandbox) Wait(context.Context) (ExitStatus, error) { return ExitStatus{}, ErrUnsupported }

// Usage is Linux only.
func (*Sandbox) Usage() (Usage, error) { return Usage{}, ErrUnsupported }

// Close is Linux only.
func (*Sandbox) Close() error { return nil }
