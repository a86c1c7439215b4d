// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"io/fs"
	"time"
)

// stampSettle is how old a file's last change must be before its stamp alone
// may stand for its content. A write lands in the file's timestamps rounded
// down to the file system's granularity (a kernel tick on tmpfs and ext4, up
// to two seconds on the coarsest), so two writes within one tick can leave
// the same stamp; a change older than stampSettle cannot share its stamp with
// any later write. Until then the file is read on every call, as if it had
// no stamp (the racily clean case git's index has too).
const stampSettle = 2 * time.Second

// fileStamp identifies one version of a file by what stat reports: device,
// inode, size, modification and change times. The kubelet's atomic writer
// puts every update into new files (a new inode behind the swapped ..data
// link), and an in-place write moves the change time, which no unprivileged
// caller can set back. ok is false where the platform reports no stamp; such
// a file is read on every call.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the Unix epoch
	ok           bool
}

// settled reports whether s may stand for the file's content at time now:
// its last change is at least stampSettle older than now, so any later write
// gets a later change time and a different stamp.
func (s fileStamp) settled(now time.Time) bool {
	limit := now.Add(-stampSettle).UnixNano()
	return s.ok && s.ctime <= limit && s.mtime <= limit
}

// stampOf returns the stamp of fi, from its platform stat data.
func stampOf(fi fs.FileInfo) fileStamp {
	return platformStamp(fi)
}
