package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanError(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain": {"connector unavailable", "connector unavailable"},
		"token": {"401 for bearer eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJ4In0.sig-nature_1 at core", "401 for bearer [redacted] at core"},
		"NUL":   {"a\x00b", "a\uFFFDb"},
		"bytes": {"a\xffb", "a\uFFFDb"},
	}
	for name, tt := range tests {
		if got := cleanError(tt.in); got != tt.want {
			t.Errorf("%s: cleanError(%q) = %q, want %q", name, tt.in, got, tt.want)
		}
	}
	long := cleanError(strings.Repeat("ż", MaxSyncError))
	if len(long) > MaxSyncError+len("…") || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Errorf("a long message is kept as %d bytes (valid UTF-8: %v)", len(long), utf8.ValidString(long))
	}
}

func TestValidInstance(t *testing.T) {
	for _, ok := range []string{"nbp-fx", "a", "ibkr.flex-2", strings.Repeat("a", MaxInstance)} {
		if !validInstance(ok) {
			t.Errorf("validInstance(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "-a", "a-", ".a", "A", "a_b", "a b", "a/b", strings.Repeat("a", MaxInstance+1)} {
		if validInstance(bad) {
			t.Errorf("validInstance(%q) = true", bad)
		}
	}
}
