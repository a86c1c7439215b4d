//go:build !linux

package egress

import (
	"net"
	"sync/atomic"
)

// splicer is Linux's: elsewhere tunnels copy through user space.
type splicer struct{}

func newSplicer(net.Conn, net.Conn) *splicer { return nil }

func (*splicer) run(*atomic.Int64, *atomic.Int64, func(float64)) error {
	panic("splice outside Linux")
}

// noPipeError is Linux's; nothing here returns it.
type noPipeError struct{ err error }

func (e noPipeError) Error() string { return e.err.Error() }
