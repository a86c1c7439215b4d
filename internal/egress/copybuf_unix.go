//go:build unix

package egress

import "syscall"

// rawReads is true on Unix: readSome reads the socket itself, so that it
// holds no buffer while it waits.
const rawReads = true

// rawRead is read(2) on a non-blocking socket: EAGAIN when nothing is there.
func rawRead(fd uintptr, p []byte) (int, error) {
	n, err := syscall.Read(int(fd), p)
	if n < 0 {
		n = 0
	}
	return n, err
}
