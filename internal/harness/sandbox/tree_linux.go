package sandbox

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Bounds of one tar entry's names.
const (
	maxNameLen  = 4096
	maxNameDeep = 128
)

// treeWriter writes a flattened image tar under a root folder. Every path
// is resolved with openat2 and RESOLVE_IN_ROOT from the root's descriptor,
// so ".." and absolute symbolic links stop at the root as they would inside
// the container, and RESOLVE_NO_XDEV keeps it off any mount below it.
type treeWriter struct {
	rootFD     int
	maxBytes   int64
	bytes      int64
	maxEntries int
	entries    int
	chown      bool
	implicit   map[string]bool // folders made as parents, before their own entry
}

// writeTree writes the tar stream r under dir, at most maxBytes of file
// content and maxEntries entries (ErrTooBig past either). Device nodes are
// skipped; setuid, setgid and sticky bits are dropped from files (a
// folder keeps its sticky bit).
func writeTree(r io.Reader, dir string, maxBytes int64, maxEntries int) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(fd) }() // an O_PATH descriptor
	w := &treeWriter{
		rootFD: fd, maxBytes: maxBytes, maxEntries: maxEntries,
		chown: os.Geteuid() == 0, implicit: map[string]bool{},
	}
	// The tar stream itself is bounded too: headers (PAX records
	// included) on top of the content.
	tr := tar.NewReader(io.LimitReader(r, 2*maxBytes+64<<20))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the image's files: %w", err)
		}
		w.entries++
		if w.entries > w.maxEntries {
			return fmt.Errorf("more than %d entries: %w", w.maxEntries, ErrTooBig)
		}
		if err := w.write(h, tr); err != nil {
			return err
		}
	}
}

// cleanName turns an entry's name into a path relative to the root, or
// fails when it has a ".." element, a NUL, or is too long or deep.
func cleanName(name string) (string, error) {
	if len(name) > maxNameLen || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("entry %q: name longer than %d bytes or with a NUL", printable(name, 200), maxNameLen)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("entry %q: a path with \"..\" leaves the root", printable(name, 200))
		}
	}
	p := strings.TrimPrefix(path.Clean("/"+name), "/")
	if strings.Count(p, "/") >= maxNameDeep {
		return "", fmt.Errorf("entry %q: deeper than %d folders", printable(name, 200), maxNameDeep)
	}
	return p, nil
}

// write creates one entry.
func (w *treeWriter) write(h *tar.Header, body io.Reader) error {
	name, err := cleanName(h.Name)
	if err != nil {
		return err
	}
	if name == "" { // the root itself
		return nil
	}
	if h.Uid < 0 || h.Gid < 0 || h.Uid > 1<<31-2 || h.Gid > 1<<31-2 {
		return fmt.Errorf("entry %q: owner %d:%d out of range", printable(name, 200), h.Uid, h.Gid)
	}
	switch h.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default: // devices and anything else are not created
		return nil
	}
	parent, base, err := w.parent(name)
	if err != nil {
		return fmt.Errorf("entry %q: %w", printable(name, 200), err)
	}
	defer func() { _ = unix.Close(parent) }() // an O_PATH descriptor
	mode := uint32(h.Mode) & 0o777
	switch h.Typeflag {
	case tar.TypeDir:
		return w.dir(parent, name, base, mode|uint32(h.Mode)&0o1000, h)
	case tar.TypeReg:
		return w.file(parent, name, base, mode, h, body)
	case tar.TypeSymlink:
		if len(h.Linkname) > maxNameLen || strings.ContainsRune(h.Linkname, 0) || h.Linkname == "" {
			return fmt.Errorf("entry %q: link target empty, too long or with a NUL", printable(name, 200))
		}
		if err := unix.Symlinkat(h.Linkname, parent, base); err != nil {
			return skipExisting(name, err)
		}
		return w.own(parent, base, h, unix.AT_SYMLINK_NOFOLLOW)
	case tar.TypeLink:
		return w.link(parent, name, base, h)
	default: // tar.TypeFifo
		if err := unix.Mknodat(parent, base, unix.S_IFIFO|mode, 0); err != nil {
			return skipExisting(name, err)
		}
		if err := unix.Fchmodat(parent, base, mode, 0); err != nil {
			return fmt.Errorf("entry %q: %w", printable(name, 200), err)
		}
		return w.own(parent, base, h, unix.AT_SYMLINK_NOFOLLOW)
	}
}

// skipExisting keeps the entry already written under a name (the upper
// layer's, or a folder made as a parent) and fails on any other error.
func skipExisting(name string, err error) error {
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return fmt.Errorf("entry %q: %w", printable(name, 200), err)
}

// dir creates a folder, or sets the mode and owner of one made earlier as a
// parent.
func (w *treeWriter) dir(parent int, name, base string, mode uint32, h *tar.Header) error {
	err := unix.Mkdirat(parent, base, 0o700)
	if errors.Is(err, unix.EEXIST) && w.implicit[name] {
		delete(w.implicit, name)
		err = nil
	}
	if err != nil {
		return skipExisting(name, err)
	}
	if err := unix.Fchmodat(parent, base, mode, 0); err != nil {
		return fmt.Errorf("entry %q: %w", printable(name, 200), err)
	}
	return w.own(parent, base, h, unix.AT_SYMLINK_NOFOLLOW)
}

// file creates a regular file with its content, counted against maxBytes.
func (w *treeWriter) file(parent int, name, base string, mode uint32, h *tar.Header, body io.Reader) error {
	if h.Size < 0 || h.Size > w.maxBytes-w.bytes {
		return fmt.Errorf("entry %q: file content past %d bytes: %w", printable(name, 200), w.maxBytes, ErrTooBig)
	}
	w.bytes += h.Size
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return skipExisting(name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := io.CopyN(f, body, h.Size); err != nil {
		_ = f.Close()
		return fmt.Errorf("entry %q: %w", printable(name, 200), err)
	}
	if err := f.Chmod(os.FileMode(mode)); err != nil {
		_ = f.Close()
		return fmt.Errorf("entry %q: %w", printable(name, 200), err)
	}
	if w.chown {
		if err := f.Chown(h.Uid, h.Gid); err != nil {
			_ = f.Close()
			return fmt.Errorf("entry %q: %w", printable(name, 200), err)
		}
	}
	return f.Close()
}

// link makes a hard link to an entry written before, found inside the root.
func (w *treeWriter) link(parent int, name, base string, h *tar.Header) error {
	target, err := cleanName(h.Linkname)
	if err != nil || target == "" {
		return fmt.Errorf("entry %q: hard link target %q is not inside the root", printable(name, 200), printable(h.Linkname, 200))
	}
	tparent, tbase, err := w.parent(target)
	if err != nil {
		return fmt.Errorf("entry %q: hard link target: %w", printable(name, 200), err)
	}
	defer func() { _ = unix.Close(tparent) }() // an O_PATH descriptor
	if err := unix.Linkat(tparent, tbase, parent, base, 0); err != nil {
		return skipExisting(name, err)
	}
	return nil
}

// own gives an entry the owner its header names, when running as root.
func (w *treeWriter) own(parent int, base string, h *tar.Header, flags int) error {
	if !w.chown {
		return nil
	}
	if err := unix.Fchownat(parent, base, h.Uid, h.Gid, flags); err != nil {
		return fmt.Errorf("entry %q: %w", printable(base, 200), err)
	}
	return nil
}

// parent opens name's parent folder inside the root (making the missing
// ones, 0755 and owned by root) and returns it with name's last element.
func (w *treeWriter) parent(name string) (int, string, error) {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if base == "" || base == "." || base == ".." {
		return -1, "", errors.New("no last element")
	}
	fd, err := w.openInRoot(dir)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, base, err
	}
	// Make the missing folders, one element at a time, each resolved
	// from the root again.
	els := strings.Split(dir, "/")
	cur, err := w.openInRoot("")
	if err != nil {
		return -1, "", err
	}
	for i, el := range els {
		prefix := strings.Join(els[:i+1], "/")
		next, err := w.openInRoot(prefix)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(cur, el, 0o755); err != nil {
				_ = unix.Close(cur)
				return -1, "", fmt.Errorf("making folder %q: %w", printable(prefix, 200), err)
			}
			_ = unix.Fchmodat(cur, el, 0o755, 0)
			w.implicit[prefix] = true
			next, err = w.openInRoot(prefix)
		}
		_ = unix.Close(cur)
		if err != nil {
			return -1, "", fmt.Errorf("folder %q: %w", printable(prefix, 200), err)
		}
		cur = next
	}
	return cur, base, nil
}

// openInRoot opens a folder inside the root, the root's own symbolic links
// resolved as if it were "/".
func (w *treeWriter) openInRoot(p string) (int, error) {
	if p == "" {
		p = "."
	}
	return unix.Openat2(w.rootFD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
}
