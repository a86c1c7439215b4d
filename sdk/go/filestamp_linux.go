// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"io/fs"
	"syscall"
)

// platformStamp reads device, inode, size and times from Linux's stat data.
func platformStamp(fi fs.FileInfo) fileStamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}
	}
	return fileStamp{
		dev:   uint64(st.Dev), // uint32 on some architectures
		ino:   uint64(st.Ino),
		size:  int64(st.Size),
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ok:    true,
	}
}
