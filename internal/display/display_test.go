package display

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/internal/plugins"
)

func TestText(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":             {"/etc/openfief/ibkr", "/etc/openfief/ibkr"},
		"non-ASCII kept":    {"zażółć ☃ 日本", "zażółć ☃ 日本"},
		"backslash kept":    {`C:\x1b`, `C:\x1b`},
		"escape":            {"/etc/a\x1b7\x1b[1A\x1b[2K\x1b8", `/etc/a\x1b7\x1b[1A\x1b[2K\x1b8`},
		"tab newline CR":    {"a\tb\nc\rd", `a\x09b\x0ac\x0dd`},
		"NUL and DEL":       {"a\x00b\x7f", `a\x00b\x7f`},
		"C1 CSI":            {"a\u009b2K", `a\x9b2K`},
		"bidi override":     {"exfil\u202emoc.elpmaxe", `exfil\u202emoc.elpmaxe`},
		"bidi isolates":     {"\u2066a\u2069\u2067\u2068", `\u2066a\u2069\u2067\u2068`},
		"marks":             {"\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		"line separators":   {"a\u2028b\u2029", `a\u2028b\u2029`},
		"invalid UTF-8":     {"a\xffb\xc3", `a\xffb\xc3`},
		"replacement kept":  {"a\ufffdb", "a\ufffdb"},
		"zero-width joiner": {"a\u200db", "a\u200db"},
		"empty":             {"", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLimit(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 6, "abcde…"},
		{"ab\x1bcd", 6, `ab…`}, // the escape is never split
		{"ab\x1b", 6, `ab\x1b`},
		{"日本語の", 3, "日本…"},
		{"abc", 0, "…"},
		{"a", 0, "a"},
	}
	for _, tt := range tests {
		if got := Limit(tt.in, tt.limit); got != tt.want {
			t.Errorf("Limit(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
		if n := utf8.RuneCountInString(Limit(tt.in, tt.limit)); n > max(tt.limit, 1) {
			t.Errorf("Limit(%q, %d) has %d runes", tt.in, tt.limit, n)
		}
	}
}

func TestLines(t *testing.T) {
	got := Lines("a\x1b\n  b\u202e\nc\nd", 10, 3)
	want := "a\\x1b\n  b\\u202e\nc\n… (1 more lines)"
	if got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

// TestSet: sorted as written, "none" for an empty set, and the caller's
// slice left as it was.
func TestSet(t *testing.T) {
	in := []string{"b.example.com:443", `a\u202eb`, "a.example.com:443"}
	got := Set(in)
	want := []string{"a.example.com:443", `a\u202eb`, "b.example.com:443"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Set = %q, want %q", got, want)
	}
	if in[0] != "b.example.com:443" {
		t.Errorf("Set sorted its argument in place: %q", in)
	}
	for _, empty := range [][]string{nil, {}} {
		if got := Set(empty); len(got) != 1 || got[0] != None {
			t.Errorf("Set(%#v) = %q, want [%q]", empty, got, None)
		}
	}
}

// FuzzText checks the escaping's promises for any input: the output is
// valid UTF-8 holding no unsafe rune, it is at most the bound, and text
// that needs no escaping and fits is returned unchanged.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "plain", "/etc/a\x1b7\x1b[1A\x1b[2K\x1b8", "a\u202eb", "\xff\xfe", "日本語", "a\u2028b", "\u009b31m", strings.Repeat("x\x1b", 300)} {
		f.Add(s, 16)
		f.Add(s, DefaultMax)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = limit%1000 + 1
		if limit < 1 {
			limit = -limit + 1
		}
		out := Limit(s, limit)
		if !utf8.ValidString(out) {
			t.Fatalf("Limit(%q, %d) = %q: not valid UTF-8", s, limit, out)
		}
		for _, r := range out {
			if plugins.IsUnsafeRune(r) {
				t.Fatalf("Limit(%q, %d) = %q holds %U", s, limit, out, r)
			}
		}
		if n := utf8.RuneCountInString(out); n > limit {
			t.Fatalf("Limit(%q, %d) = %q: %d runes", s, limit, out, n)
		}
		if plugins.CheckText(s, 0) == nil && utf8.RuneCountInString(s) <= limit && out != s {
			t.Fatalf("Limit(%q, %d) = %q changed safe text that fits", s, limit, out)
		}
		if plugins.CheckText(s, 0) == nil && out != s {
			// Cut safe text keeps its beginning, then the ellipsis.
			if !strings.HasSuffix(out, Ellipsis) || !strings.HasPrefix(s, strings.TrimSuffix(out, Ellipsis)) {
				t.Fatalf("Limit(%q, %d) = %q is not a prefix and an ellipsis", s, limit, out)
			}
		}
		if ls := Lines(s, limit, 5); !utf8.ValidString(ls) {
			t.Fatalf("Lines(%q) not valid UTF-8", s)
		} else {
			for _, r := range ls {
				if r != '\n' && plugins.IsUnsafeRune(r) {
					t.Fatalf("Lines(%q) = %q holds %U", s, ls, r)
				}
			}
		}
	})
}
