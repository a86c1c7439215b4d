package sandbox

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// onOwnThread runs f locked to an OS thread that is not the process's main
// thread, and ends that thread with f: f may move it into another
// namespace, and such a thread must never run other goroutines. The main
// thread is kept out because the runtime cannot end it (it would stay in
// the sandbox's namespace for good, and /proc/PID/ns shows the main
// thread's).
func onOwnThread(f func()) {
	runtime.LockOSThread()
	if unix.Gettid() != unix.Getpid() {
		f()
		return // still locked: the runtime ends the thread
	}
	// On the main thread: run f on another goroutine, which cannot be
	// given this thread while this goroutine holds it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f()
	}()
	<-done
	runtime.UnlockOSThread() // this thread's state was never changed
}
