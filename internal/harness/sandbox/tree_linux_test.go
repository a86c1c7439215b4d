package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// entry is one tar entry of a test archive.
type entry struct {
	name, link string
	typ        byte
	mode       int64
	data       string
	size       int64 // when not len(data)
}

func mkTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		size := int64(len(e.data))
		if e.size != 0 {
			size = e.size
		}
		if e.typ != tar.TypeReg {
			size = 0
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: size, Devmajor: 1, Devminor: 3}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileTars are archives that try to write outside the root.
func hostileTars(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"dotdot":            mkTar(t, entry{name: "../../escaped", typ: tar.TypeReg, data: "x"}),
		"dotdot inside":     mkTar(t, entry{name: "a/../../escaped", typ: tar.TypeReg, data: "x"}),
		"absolute name":     mkTar(t, entry{name: "/escaped", typ: tar.TypeReg, data: "x"}),
		"absolute symlink":  mkTar(t, entry{name: "etc", typ: tar.TypeSymlink, link: "/"}, entry{name: "etc/escaped", typ: tar.TypeReg, data: "x"}),
		"relative symlink":  mkTar(t, entry{name: "up", typ: tar.TypeSymlink, link: "../../../.."}, entry{name: "up/escaped", typ: tar.TypeReg, data: "x"}),
		"symlink parent":    mkTar(t, entry{name: "d", typ: tar.TypeSymlink, link: "/.."}, entry{name: "d/e/escaped", typ: tar.TypeReg, data: "x"}),
		"write on symlink":  mkTar(t, entry{name: "s", typ: tar.TypeSymlink, link: "../escaped"}, entry{name: "s", typ: tar.TypeReg, data: "x"}),
		"hardlink out":      mkTar(t, entry{name: "h", typ: tar.TypeLink, link: "../canary"}),
		"hardlink absolute": mkTar(t, entry{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}),
		"hardlink via link": mkTar(t, entry{name: "l", typ: tar.TypeSymlink, link: "/"}, entry{name: "h", typ: tar.TypeLink, link: "l/../canary"}),
		"setuid":            mkTar(t, entry{name: "bin/su", typ: tar.TypeReg, mode: 0o6755, data: "#!"}),
		"device":            mkTar(t, entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666}, entry{name: "dev/sda", typ: tar.TypeBlock, mode: 0o666}),
		"too big":           mkTar(t, entry{name: "big", typ: tar.TypeReg, size: 128 << 10, data: string(make([]byte, 128<<10))}),
		"dir then file":     mkTar(t, entry{name: "x/y", typ: tar.TypeReg, data: "y"}, entry{name: "x", typ: tar.TypeDir, mode: 0o4755}),
	}
}

// checkContained fails when anything but root and the canary is beside
// root, the canary changed, or root holds a device or a setuid/setgid bit.
func checkContained(t *testing.T, parent string) {
	t.Helper()
	names, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	if !slices.Equal(got, []string{"canary", "root"}) {
		t.Errorf("beside the root: %v", got)
	}
	st, err := os.Lstat(filepath.Join(parent, "canary"))
	if err != nil || st.Mode() != 0o600 || st.Size() != 6 {
		t.Errorf("canary: %v, %v", st, err)
	}
	if st != nil {
		if n := st.Sys(); n != nil {
			if nl := nlink(st); nl != 1 {
				t.Errorf("the canary has %d links", nl)
			}
		}
	}
	_ = filepath.WalkDir(filepath.Join(parent, "root"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			t.Errorf("%s: mode %v", p, info.Mode())
		}
		return nil
	})
}

func newRoot(t *testing.T) (parent, root string) {
	t.Helper()
	parent = t.TempDir()
	root = filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "canary"), []byte("canary"), 0o600); err != nil {
		t.Fatal(err)
	}
	return parent, root
}

func TestWriteTreeHostile(t *testing.T) {
	passwd, _ := os.ReadFile("/etc/passwd")
	for name, data := range hostileTars(t) {
		t.Run(name, func(t *testing.T) {
			parent, root := newRoot(t)
			err := writeTree(bytes.NewReader(data), root, 64<<10, 100)
			t.Logf("writeTree: %v", err)
			checkContained(t, parent)
			if name == "too big" && !errors.Is(err, ErrTooBig) {
				t.Errorf("writeTree: %v, want ErrTooBig", err)
			}
			if name == "absolute symlink" {
				// The link resolves to the image's own root.
				if b, err := os.ReadFile(filepath.Join(root, "escaped")); err != nil || string(b) != "x" {
					t.Errorf("the file written through the link: %q, %v", b, err)
				}
			}
			if name == "setuid" {
				if st, err := os.Stat(filepath.Join(root, "bin/su")); err != nil || st.Mode() != 0o755 {
					t.Errorf("bin/su: %v, %v", st, err)
				}
			}
			if name == "write on symlink" {
				if l, err := os.Readlink(filepath.Join(root, "s")); err != nil || l != "../escaped" {
					t.Errorf("the link was replaced: %q, %v", l, err)
				}
			}
			if name == "dir then file" {
				if st, err := os.Stat(filepath.Join(root, "x")); err != nil || st.Mode() != fs.ModeDir|0o755 {
					t.Errorf("x: %v, %v", st, err)
				}
			}
		})
	}
	if now, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(now, passwd) {
		t.Error("/etc/passwd changed")
	}
}

func TestWriteTreeEntryBound(t *testing.T) {
	var es []entry
	for i := range 11 {
		es = append(es, entry{name: "d" + string(rune('a'+i)), typ: tar.TypeDir, mode: 0o755})
	}
	_, root := newRoot(t)
	if err := writeTree(bytes.NewReader(mkTar(t, es...)), root, 1<<20, 10); !errors.Is(err, ErrTooBig) {
		t.Fatalf("writeTree: %v, want ErrTooBig", err)
	}
}

func FuzzWriteTree(f *testing.F) {
	for name, data := range hostileTars(f) {
		if name != "too big" { // large seeds slow the fuzzer to a crawl
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parent, root := newRoot(t)
		_ = writeTree(bytes.NewReader(data), root, 64<<10, 100)
		checkContained(t, parent)
	})
}
