package core

import (
	"strings"
	"testing"
)

func TestMediaTypeAndBaseName(t *testing.T) {
	for in, want := range map[string]string{
		"text/csv":                      "text/csv",
		"Text/CSV; charset=utf-8":       "text/csv",
		"application/xml":               "application/xml",
		"":                              "",
		"csv":                           "",
		"a/b/c":                         "",
		"text/\"csv\"":                  "",
		strings.Repeat("a", 200) + "/x": "",
	} {
		if got := mediaType(in); got != want {
			t.Errorf("mediaType(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"statement.csv":        "statement.csv",
		"../../etc/passwd":     "passwd",
		`C:\Users\me\flex.xml`: "flex.xml",
		"dir/":                 "",
	} {
		if got := baseName(in); got != want {
			t.Errorf("baseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzUploadHints: whatever an owner's request carries as file name and
// Content-Type, the hints passed to a connector hold no directory, no
// whitespace or quote in the media type, and stay short.
func FuzzUploadHints(f *testing.F) {
	for _, s := range []string{"text/csv; charset=utf-8", "../a/b.csv", `x\y`, "a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if mt := mediaType(s); mt != "" && (len(mt) > 127 || strings.Count(mt, "/") != 1 || strings.ContainsAny(mt, " \t\r\n\"")) {
			t.Fatalf("mediaType(%q) = %q", s, mt)
		}
		if b := baseName(s); strings.ContainsAny(b, `/\`) {
			t.Fatalf("baseName(%q) = %q", s, b)
		}
	})
}
