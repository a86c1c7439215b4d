// Package boundedfile reads a file only up to a bound, for the files a
// vendor, a registry or another user may have written: a file longer than
// the bound is refused without reading more than one byte past it.
package boundedfile

import (
	"fmt"
	"io"
	"os"
)

// Read reads at most limit bytes of path; a longer file is an error naming
// path and the bound.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is longer than %d bytes", path, limit)
	}
	return data, nil
}
