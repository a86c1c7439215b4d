package egress

import (
	"io"
	"net"
	"sync"
	"syscall"
)

// copyBufferSize is the size of the buffers tunnels copy through unless
// they splice (Options.Splice, which measured slower on the loopback of
// docs/performance.md), and 128 KiB moves a burst of a fast stream in few
// system calls.
const copyBufferSize = 128 << 10

// copyBuffer is one pooled buffer; a pointer, so the pool stores it without
// allocating.
type copyBuffer struct{ b []byte }

var copyBuffers = sync.Pool{New: func() any { return &copyBuffer{b: make([]byte, copyBufferSize)} }}

func putCopyBuffer(b *copyBuffer) { copyBuffers.Put(b) }

// sockReader reads one side of a tunnel for copy. On Unix it reads the
// socket itself, through its syscall.RawConn, so that it can wait until the
// socket has bytes (or its end, or an error) without holding a buffer, then
// read what is there into a pooled buffer. A tunnel waiting for its peer
// therefore holds no copy buffer: idle tunnels cost their goroutines and
// sockets, not a buffer each.
type sockReader struct {
	src net.Conn
	rc  syscall.RawConn // nil: read through src, holding a buffer while waiting
	// The result of the last readOnce, and readOnce as a func value, made
	// once so that a read allocates nothing.
	buf  *copyBuffer
	k    int
	rerr error
	fn   func(fd uintptr) bool
}

func newSockReader(src net.Conn) *sockReader {
	r := &sockReader{src: src}
	if sc, ok := src.(syscall.Conn); ok && rawReads {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
			r.fn = r.readOnce
		}
	}
	return r
}

// readOnce is the RawConn.Read callback: it reads into a pooled buffer and
// gives the buffer back when nothing is there yet, before the poller waits.
func (r *sockReader) readOnce(fd uintptr) bool {
	r.buf = copyBuffers.Get().(*copyBuffer)
	r.k, r.rerr = rawRead(fd, r.buf.b)
	if r.rerr == syscall.EAGAIN {
		putCopyBuffer(r.buf)
		r.buf = nil
		return false
	}
	return true
}

// read returns the next bytes of src in a pooled buffer, which the caller
// gives back with putCopyBuffer (buf may be non-nil with k == 0). The end
// of src is io.EOF with k == 0.
func (r *sockReader) read() (buf *copyBuffer, k int, err error) {
	if r.rc == nil {
		buf = copyBuffers.Get().(*copyBuffer)
		k, err = r.src.Read(buf.b)
		return buf, k, err
	}
	r.buf, r.k, r.rerr = nil, 0, nil
	err = r.rc.Read(r.fn)
	buf, k = r.buf, r.k
	r.buf = nil
	switch {
	case err != nil: // the deadline, or the connection closed meanwhile
		return buf, 0, err
	case r.rerr == syscall.EINTR:
		return buf, 0, nil
	case r.rerr != nil:
		return buf, 0, r.rerr
	case k == 0:
		return buf, 0, io.EOF
	}
	return buf, k, nil
}
