package node

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// defaultLockWait bounds the wait for the machine's node lock: another real
// node (a test package running in parallel, `openfief dev --node real`) may
// hold it.
const defaultLockWait = 5 * time.Minute

// EnvLockWait names the variable whose Go duration replaces
// defaultLockWait: `make test` sets it, since its real-node packages run in
// parallel and each waits for the others' nodes (the in-cluster suite holds
// one for minutes).
const EnvLockWait = "OPENFIEF_NODE_LOCK_WAIT"

// LockWait is how long a real node waits for the machine's node lock:
// $OPENFIEF_NODE_LOCK_WAIT when it holds a positive duration, else five
// minutes. The tests' leftover checks wait as long.
func LockWait() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(EnvLockWait)); err == nil && d > 0 {
		return d
	}
	return defaultLockWait
}

// lockNodes takes the machine's node lock, polling until timeout.
func lockNodes(timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(nodeLockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devcluster: node lock: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			_ = f.Close() // the lock error is the one to report
			return nil, fmt.Errorf("devcluster: another real node holds %s: %w", nodeLockFile, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// unlockNodes releases the lock lockNodes took.
func unlockNodes(f *os.File) {
	if f != nil {
		_ = f.Close() // closing releases the flock
	}
}
