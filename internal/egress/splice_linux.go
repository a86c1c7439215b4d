//go:build linux

package egress

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// With Options.Splice, a tunnel between two bare TCP sockets moves its
// bytes with splice(2): from the source socket into a pipe, and from the
// pipe into the destination socket. The kernel passes references to the received pages
// through the pipe, so no byte is copied into or out of this process. The
// standard library's io.Copy splices too, but it holds a pipe (two open
// files) for as long as the copy waits, so every idle tunnel would hold two
// pipes; here, as with the read loop of sockReader, a direction takes a
// pipe only once its source has bytes and gives it back, empty, when the
// source has none left, so an idle tunnel holds none. It is off by default:
// on the loopback of docs/performance.md splicing measured slower than the
// read and write loop (see "What limits each" there).

// splicePipeSize is the capacity asked of each pipe, and so the most one
// splice moves: 1 MiB, the default /proc/sys/fs/pipe-max-size, lets one
// call take all a fast sender has queued. A pipe that cannot be grown (its
// user is past /proc/sys/fs/pipe-user-pages-soft) keeps the size it has.
const splicePipeSize = 1 << 20

// maxIdlePipes bounds the empty pipes kept for the next burst; more are
// closed once given back. It bounds the proxy's idle open files, not the
// pipes in use, which are one per direction moving bytes at the moment.
const maxIdlePipes = 32

// spliceFlags: never block in the kernel (the Go poller waits instead);
// SPLICE_F_MOVE is a hint that the kernel may move pages.
const spliceFlags = 0x1 /* SPLICE_F_MOVE */ | 0x2 /* SPLICE_F_NONBLOCK */

// fcntl commands for a pipe's capacity, absent from package syscall.
const (
	fSetPipeSize = 1031
	fGetPipeSize = 1032
)

// splicePipe is one pipe: its two ends and its capacity in bytes.
type splicePipe struct {
	r, w int
	size int
}

var idlePipes struct {
	mu   sync.Mutex
	free []*splicePipe
}

// getPipe returns an empty pipe, a kept one when there is one.
func getPipe() (*splicePipe, error) {
	idlePipes.mu.Lock()
	if n := len(idlePipes.free); n > 0 {
		p := idlePipes.free[n-1]
		idlePipes.free = idlePipes.free[:n-1]
		idlePipes.mu.Unlock()
		return p, nil
	}
	idlePipes.mu.Unlock()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, err
	}
	p := &splicePipe{r: fds[0], w: fds[1]}
	size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(p.w), fSetPipeSize, splicePipeSize)
	if errno != 0 {
		// Past the user's soft limit of pipe pages: keep the default.
		if size, _, errno = syscall.Syscall(syscall.SYS_FCNTL, uintptr(p.w), fGetPipeSize, 0); errno != 0 {
			p.close()
			return nil, errno
		}
	}
	p.size = int(size)
	return p, nil
}

// putPipe keeps p for another tunnel; p must be empty.
func putPipe(p *splicePipe) {
	idlePipes.mu.Lock()
	if len(idlePipes.free) < maxIdlePipes {
		idlePipes.free = append(idlePipes.free, p)
		p = nil
	}
	idlePipes.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// close closes both ends. Nothing was promised on a pipe's bytes, and a
// close of a pipe end this process owns has no failure worth telling.
func (p *splicePipe) close() {
	_ = syscall.Close(p.r)
	_ = syscall.Close(p.w)
}

// noPipeError is run's error when no pipe could be had (the process is out
// of open files, say): nothing has been read from the source since the last
// bytes were delivered, so the caller may carry on copying through user
// space.
type noPipeError struct{ err error }

func (e noPipeError) Error() string { return "no pipe to splice through: " + e.err.Error() }
func (e noPipeError) Unwrap() error { return e.err }

// splicer moves one direction of a tunnel through a pipe. Its fill and
// drain are the RawConn callbacks, made once as func values so that a
// splice allocates nothing.
type splicer struct {
	src, dst syscall.RawConn

	p      *splicePipe // held only while bytes are in it or moving
	inPipe int         // bytes in p, not yet in dst

	n   int   // the last splice's count
	err error // the last splice's error

	fillFn, drainFn func(fd uintptr) bool
}

// newSplicer returns a splicer from src to dst when both are bare
// *net.TCPConn, the only connections whose sockets this process may read
// and write behind their backs: any other net.Conn (a wrapper, a TLS
// connection, a test's pipe) is copied through user space.
func newSplicer(dst, src net.Conn) *splicer {
	dstTCP, ok := dst.(*net.TCPConn)
	if !ok {
		return nil
	}
	srcTCP, ok := src.(*net.TCPConn)
	if !ok {
		return nil
	}
	dstRC, err := dstTCP.SyscallConn()
	if err != nil {
		return nil
	}
	srcRC, err := srcTCP.SyscallConn()
	if err != nil {
		return nil
	}
	sp := &splicer{src: srcRC, dst: dstRC}
	sp.fillFn, sp.drainFn = sp.fill, sp.drain
	return sp
}

// fill is the source's RawConn.Read callback: it splices what the socket
// holds into the pipe, taking a pipe first, and gives the pipe back before
// the poller waits when the socket has nothing.
func (s *splicer) fill(fd uintptr) bool {
	if s.p == nil {
		p, err := getPipe()
		if err != nil {
			s.err = noPipeError{err}
			return true
		}
		s.p = p
	}
	n, err := syscall.Splice(int(fd), nil, s.p.w, nil, s.p.size, spliceFlags)
	if err == syscall.EAGAIN {
		putPipe(s.p) // empty: fill runs only once the pipe is drained
		s.p = nil
		return false
	}
	s.n, s.err = int(max(n, 0)), err
	return true
}

// drain is the destination's RawConn.Write callback: it splices what the
// pipe holds into the socket, and waits for room when the socket has none.
func (s *splicer) drain(fd uintptr) bool {
	n, err := syscall.Splice(s.p.r, nil, int(fd), nil, s.inPipe, spliceFlags)
	if err == syscall.EAGAIN {
		return false
	}
	s.n, s.err = int(max(n, 0)), err
	return true
}

// release gives the pipe back when it is empty and closes it when bytes
// are left in it (the tunnel is ending with them undelivered).
func (s *splicer) release() {
	if s.p == nil {
		return
	}
	if s.inPipe == 0 {
		putPipe(s.p)
	} else {
		s.p.close()
	}
	s.p, s.inPipe = nil, 0
}

// run moves bytes until the source ends (io.EOF) or an error, counting
// what reaches dst in n and count and stamping active at every fill. A
// noPipeError leaves the tunnel whole, with every byte read delivered.
func (s *splicer) run(active *atomic.Int64, n *atomic.Int64, count func(float64)) error {
	defer s.release()
	for {
		s.n, s.err = 0, nil
		if err := s.src.Read(s.fillFn); err != nil {
			return err // the connection closed, or its deadline passed
		}
		switch {
		case s.err == syscall.EINTR:
			continue
		case s.err != nil:
			return s.err
		case s.n == 0:
			return io.EOF
		}
		active.Store(time.Now().UnixNano())
		s.inPipe = s.n
		for s.inPipe > 0 {
			s.n, s.err = 0, nil
			if err := s.dst.Write(s.drainFn); err != nil {
				return err
			}
			if s.err == syscall.EINTR {
				continue
			}
			if s.n > 0 {
				s.inPipe -= s.n
				n.Add(int64(s.n))
				count(float64(s.n))
			}
			if s.err != nil {
				return s.err
			}
			if s.n == 0 {
				return io.ErrShortWrite
			}
		}
	}
}
