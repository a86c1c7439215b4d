package images

import (
	"context"
	"testing"
	"time"
)

// TestSource: the tree's commit, epoch and version are read, a dirty tree
// keys by more than its commit, and the environment overrides the epoch
// and the version.
func TestSource(t *testing.T) {
	src := testSource(t)
	if len(src.Commit) != 40 || src.Epoch.IsZero() || src.Version == "" {
		t.Fatalf("source %+v", src)
	}
	if (src.Dirty == "") != (src.Key() == src.Commit) {
		t.Errorf("key %s for dirty %q", src.Key(), src.Dirty)
	}
	if got := (Source{Version: "v0.0.0-1-abc+dirty"}).Tag(); got != "v0.0.0-1-abc-dirty" {
		t.Errorf("tag %s", got)
	}
	if _, err := FindRoot("/"); err == nil {
		t.Error("found a source tree at /")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "86400")
	t.Setenv("VERSION", "v1.2.3")
	s, err := ReadSource(context.Background(), src.Root)
	if err != nil || !s.Epoch.Equal(time.Unix(86400, 0)) || s.Version != "v1.2.3" {
		t.Errorf("overridden source %+v, %v", s, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := ReadSource(context.Background(), src.Root); err == nil {
		t.Error("an invalid SOURCE_DATE_EPOCH was accepted")
	}
}
