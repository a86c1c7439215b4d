package plugins

import (
	"errors"
	"strings"
	"testing"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseImageRef(t *testing.T) {
	type want struct{ registry, repository string }
	valid := map[string]want{
		"repo@" + testDigest:                                {"", "repo"},
		"org/repo@" + testDigest:                            {"", "org/repo"},
		"ghcr.io/arkadiuss/openfief/nbp-fx@" + testDigest:   {"ghcr.io", "arkadiuss/openfief/nbp-fx"},
		"localhost/repo@" + testDigest:                      {"localhost", "repo"},
		"localhost:5000/repo@" + testDigest:                 {"localhost:5000", "repo"},
		"127.0.0.1:5000/a/b@" + testDigest:                  {"127.0.0.1:5000", "a/b"},
		"registry.example.com/a.b_c__d---e/f@" + testDigest: {"registry.example.com", "a.b_c__d---e/f"},
	}
	for in, w := range valid {
		t.Run(in, func(t *testing.T) {
			ref, err := ParseImageRef(in)
			if err != nil {
				t.Fatalf("ParseImageRef(%q) = %v", in, err)
			}
			if ref.Registry() != w.registry || ref.Repository() != w.repository || ref.Digest() != testDigest {
				t.Errorf("got registry %q repository %q digest %q", ref.Registry(), ref.Repository(), ref.Digest())
			}
			if ref.String() != in {
				t.Errorf("String() = %q, want %q", ref.String(), in)
			}
			if ref.IsZero() {
				t.Error("parsed reference reports IsZero")
			}
		})
	}

	invalid := map[string]string{
		"empty":                          "",
		"tag only":                       "ghcr.io/org/repo:1.4",
		"tag beside digest":              "ghcr.io/org/repo:1.4@" + testDigest,
		"tag beside digest, no registry": "repo:latest@" + testDigest,
		"no repository":                  "@" + testDigest,
		"registry only":                  "ghcr.io/@" + testDigest,
		"sha512":                         "repo@sha512:" + strings.Repeat("a", 128),
		"short digest":                   "repo@sha256:abc",
		"long digest":                    "repo@" + testDigest + "0",
		"upper-case digest":              "repo@sha256:" + strings.Repeat("A", 64),
		"upper-case repository":          "Org/repo@" + testDigest,
		"double slash":                   "org//repo@" + testDigest,
		"leading separator":              "org/-repo@" + testDigest,
		"trailing separator":             "org/repo.@" + testDigest,
		"three underscores":              "org/a___b@" + testDigest,
		"two digests":                    "repo@" + testDigest + "@" + testDigest,
		"bad port":                       "localhost:0/repo@" + testDigest,
		"port too large":                 "localhost:65536/repo@" + testDigest,
		"port leading zero":              "localhost:0500/repo@" + testDigest,
		"registry bad label":             "-bad.io/repo@" + testDigest,
		"space":                          "org/re po@" + testDigest,
		"too long":                       strings.Repeat("a", 1100) + "@" + testDigest,
		"repository too long":            strings.Repeat("a/", 130) + "a@" + testDigest,
	}
	for name, in := range invalid {
		t.Run(name, func(t *testing.T) {
			ref, err := ParseImageRef(in)
			if !errors.Is(err, ErrInvalidImage) {
				t.Fatalf("ParseImageRef(%q) = %v, %v; want ErrInvalidImage", in, ref, err)
			}
			if !ref.IsZero() {
				t.Errorf("failed parse returned a non-zero ref %v", ref)
			}
		})
	}
}

func TestImageRefZero(t *testing.T) {
	var r ImageRef
	if !r.IsZero() || r.String() != "" || r.Name() != "" {
		t.Errorf("zero ImageRef: IsZero %v String %q Name %q", r.IsZero(), r.String(), r.Name())
	}
}

func FuzzParseImageRef(f *testing.F) {
	for _, s := range []string{
		"repo@" + testDigest, "ghcr.io/org/repo@" + testDigest, "localhost:5000/a/b@" + testDigest,
		"repo:1@" + testDigest, "a__b/c--d.e@" + testDigest, "@", "x@sha256:", "[::1]:5000/r@" + testDigest,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseImageRef(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidImage) {
				t.Fatalf("error %v does not wrap ErrInvalidImage", err)
			}
			return
		}
		// A parsed reference prints back to itself and parses again to the same value.
		if ref.String() != s {
			t.Fatalf("String() = %q, input %q", ref.String(), s)
		}
		again, err := ParseImageRef(ref.String())
		if err != nil || again != ref {
			t.Fatalf("round trip: %v, %v", again, err)
		}
		if strings.Count(s, "@") != 1 || strings.ContainsAny(ref.Repository(), ":@") {
			t.Fatalf("accepted ambiguous reference %q", s)
		}
	})
}
