package sandbox

import (
	"io/fs"
	"syscall"
)

// nlink is a file's link count.
func nlink(st fs.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Nlink)
	}
	return 0
}
