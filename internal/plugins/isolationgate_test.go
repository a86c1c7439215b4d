package plugins

import (
	"errors"
	"testing"
	"time"
)

func TestParseGateTarget(t *testing.T) {
	for in, want := range map[string]string{
		"cluster-dns":         "cluster-dns",
		"api-server":          "api-server",
		"node-dns":            "node-dns",
		"tcp=203.0.113.7:443": "tcp=203.0.113.7:443",
		"tcp=[fd00::a]:53":    "tcp=[fd00::a]:53",
	} {
		got, err := ParseGateTarget(in)
		if err != nil || got.String() != want {
			t.Errorf("%q: %v, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "dns", "udp=10.0.0.1:53", "dns-udp=10.0.0.10:53", "dns-tcp=10.0.0.10:53", "tcp=example.com:443", "tcp=10.0.0.1", "tcp=10.0.0.1:0",
		"tcp=[fe80::1%eth0]:53", "tcp=10.0.0.1:65536", "Cluster-DNS", "tcp=10.0.0.1:443 ",
		"tcp=" + string(make([]byte, 80)),
	} {
		if _, err := ParseGateTarget(in); !errors.Is(err, ErrInvalidGateTarget) {
			t.Errorf("%q: %v, want ErrInvalidGateTarget", in, err)
		}
	}
}

func TestParseGateTargets(t *testing.T) {
	got, err := ParseGateTargets(" node-dns,tcp=10.0.0.1:443,cluster-dns,node-dns,")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, g := range got {
		s = append(s, g.String())
	}
	if want := "cluster-dns node-dns tcp=10.0.0.1:443"; joinSpace(s) != want {
		t.Errorf("got %q, want %q (sorted, no duplicates)", joinSpace(s), want)
	}
	for _, in := range []string{"", " , ", "cluster-dns,bogus"} {
		if _, err := ParseGateTargets(in); !errors.Is(err, ErrInvalidGateTarget) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func joinSpace(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestGateSettingsValidate(t *testing.T) {
	if err := DefaultGateSettings().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*GateSettings){
		"no targets":   func(g *GateSettings) { g.Targets = nil },
		"zero rounds":  func(g *GateSettings) { g.Rounds = 0 },
		"tiny timeout": func(g *GateSettings) { g.AttemptTimeout = time.Millisecond },
		"huge timeout": func(g *GateSettings) { g.AttemptTimeout = time.Minute },
		"deadline":     func(g *GateSettings) { g.Deadline = time.Hour },
		"short":        func(g *GateSettings) { g.Deadline = 10 * time.Millisecond },
		"many targets": func(g *GateSettings) { g.Targets = make([]GateTarget, MaxGateTargets+1) },
	} {
		g := DefaultGateSettings()
		mod(&g)
		if g.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseGateTarget: a parsed target prints as what parses back to it.
func FuzzParseGateTarget(f *testing.F) {
	for _, s := range []string{"cluster-dns", "tcp=1.2.3.4:5", "tcp=[::1]:53", "tcp=10.0.0.1:053"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGateTarget(s)
		if err != nil {
			return
		}
		again, err := ParseGateTarget(g.String())
		if err != nil || again != g {
			t.Fatalf("%q -> %q -> %v, %v", s, g.String(), again, err)
		}
	})
}
