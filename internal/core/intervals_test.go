package core

import (
	"errors"
	"testing"
	"time"
)

func TestParseInterval(t *testing.T) {
	for in, want := range map[string]struct {
		name string
		d    time.Duration
		ok   bool
	}{
		"fx=15m":       {"fx", 15 * time.Minute, true},
		"ibkr-a=24h":   {"ibkr-a", 24 * time.Hour, true},
		"fx=1s":        {"fx", time.Second, true},
		"fx=500ms":     {},
		"fx=169h":      {},
		"fx":           {},
		"=15m":         {},
		"Fx=15m":       {},
		"fx=15":        {},
		"fx=-1h":       {},
		"fx=15m=1h":    {},
		"plugin-fx=1h": {"plugin-fx", time.Hour, true},
	} {
		name, d, err := ParseInterval(in)
		if want.ok != (err == nil) || name != want.name || d != want.d {
			t.Errorf("ParseInterval(%q) = %q, %v, %v; want %q, %v, ok=%v", in, name, d, err, want.name, want.d, want.ok)
		}
		if err != nil && !errors.Is(err, ErrInterval) {
			t.Errorf("ParseInterval(%q): %v does not wrap ErrInterval", in, err)
		}
	}
}

func FuzzParseInterval(f *testing.F) {
	for _, s := range []string{"fx=15m", "a=1s", "x=", "=", "fx=1h1m1s", "a-b=168h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, d, err := ParseInterval(s)
		if err != nil {
			if !errors.Is(err, ErrInterval) {
				t.Fatalf("%v does not wrap ErrInterval", err)
			}
			return
		}
		if CheckInterval(d) != nil || name == "" {
			t.Fatalf("accepted %q as %q, %v", s, name, d)
		}
	})
}
