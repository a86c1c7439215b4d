package images

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

// TestToolImage packs the same binary twice at the same epoch and gets the
// same digest; the image runs the binary at /<name> as the non-root user,
// and holds it byte for byte.
func TestToolImage(t *testing.T) {
	epoch := time.Unix(0, 0)
	bin := []byte("\x7fELF not really")
	a, err := ToolImage("coredns", "github.com/coredns/coredns@v1.15.0", bin, epoch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ToolImage("coredns", "github.com/coredns/coredns@v1.15.0", bin, epoch)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("digests %s and %s of the same input; want equal", da, db)
	}
	other, err := ToolImage("coredns", "github.com/coredns/coredns@v1.15.0", append(slices.Clone(bin), '!'), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if do, _ := other.Digest(); do == da {
		t.Errorf("another binary gave the same digest %s", do)
	}
	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; !slices.Equal(got, []string{"/coredns"}) {
		t.Errorf("entrypoint %v; want [/coredns]", got)
	}
	if cf.Config.User != User {
		t.Errorf("user %q; want %q", cf.Config.User, User)
	}
	if !cf.Created.Time.Equal(epoch) {
		t.Errorf("created %v; want %v", cf.Created.Time, epoch)
	}
	files := extract(t, a, epoch)
	if !bytes.Equal(files["/coredns"].data, bin) {
		t.Errorf("/coredns holds %q; want the binary", files["/coredns"].data)
	}
	if _, ok := files["/etc/passwd"]; !ok {
		t.Error("no /etc/passwd (the users layer)")
	}
}
