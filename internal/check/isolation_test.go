package check

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func testTargets() Targets {
	return Targets{
		ClusterDNS: "10.0.0.10:53", NodeResolver: "10.1.0.1:53", Outside: "192.175.48.5:443", APIServer: "10.0.0.1:443",
		OtherProbe: "10.1.0.9:8080", ProbeA: "10.1.0.8:8080", CorePlugin: "10.1.0.3:8080", CoreOwner: "10.1.0.3:8081",
		GrantedHost: "example.com:443", DeniedHost: "example.org:443", DNSQuery: "kubernetes.default.svc.cluster.local.",
	}
}

// isolated is what every cell observes on a cluster that isolates plugins.
func isolated(cells []Cell) map[string]Observation {
	out := map[string]Observation{}
	for _, c := range cells {
		switch c.Expect {
		case ExpectBlocked:
			out[c.Name] = Observation{Observed: ObservedTimeout}
		case ExpectOpen:
			out[c.Name] = Observation{Observed: ObservedOpen}
		case ExpectProxyAdmitted:
			out[c.Name] = Observation{Observed: "status 502", Detail: "resolve_failed"}
		default:
			out[c.Name] = Observation{Observed: string(c.Expect)}
		}
	}
	return out
}

func TestExpectationMatches(t *testing.T) {
	for _, tc := range []struct {
		e        Expectation
		observed string
		want     bool
	}{
		{ExpectBlocked, ObservedRefused, true},
		{ExpectBlocked, ObservedTimeout, true},
		{ExpectBlocked, ObservedOpen, false},
		{ExpectBlocked, ObservedAnswered, false},
		{ExpectBlocked, ObservedError, false},
		{ExpectBlocked, "", false},
		{ExpectOpen, ObservedOpen, true},
		{ExpectOpen, ObservedTimeout, false},
		{ExpectProxyAuthRequired, "status 407", true},
		{ExpectProxyAuthRequired, "status 200", false},
		{ExpectProxyForbidden, "status 403", true},
		{ExpectProxyForbidden, "status 200", false},
		{ExpectProxyAdmitted, "status 200", true},
		{ExpectProxyAdmitted, "status 502", true},
		{ExpectProxyAdmitted, "status 403", false},
		{ExpectProxyAdmitted, "status 503", false},
		{ExpectProxyAdmitted, ObservedRefused, false},
	} {
		if got := tc.e.Matches(tc.observed); got != tc.want {
			t.Errorf("%q.Matches(%q) = %v, want %v", tc.e, tc.observed, got, tc.want)
		}
	}
}

func TestIsolationCellsAreNamedOnce(t *testing.T) {
	cells := IsolationCells(testTargets())
	seen := map[string]bool{}
	for _, c := range cells {
		if seen[c.Name] {
			t.Errorf("cell %q twice", c.Name)
		}
		seen[c.Name] = true
		if c.Meaning == "" || c.Expect == "" || (c.From != ProbeA && c.From != ProbeB) {
			t.Errorf("cell %q incomplete: %+v", c.Name, c)
		}
		proxy := c.Kind == KindProxyNoToken || c.Kind == KindProxyToken
		if proxy == (c.Target != "") || proxy != (c.Host != "") {
			t.Errorf("cell %q: a proxy cell names a host and no target, any other a target: %+v", c.Name, c)
		}
	}
	if len(cells) != 12 {
		t.Errorf("%d cells, want the issue's 12", len(cells))
	}
}

func TestIsolationAllAsExpected(t *testing.T) {
	cells := IsolationCells(testTargets())
	rows := Measure(cells, isolated(cells))
	rs := Isolation(rows)
	if len(rs) != 1 || rs[0].Status != OK || rs[0].Name != IsolationEnforcedName {
		t.Fatalf("results %+v, want one passed %q", rs, IsolationEnforcedName)
	}
	if d := Differing(rows); len(d) != 0 || IsolationSummary(rows) != "" {
		t.Errorf("differing %v", d)
	}
}

// Without a NetworkPolicy controller every cell that must be blocked is
// open, the proxy still answers as it should: each blocked cell fails with
// its meaning, and one more result says nothing is enforced.
func TestIsolationNoEnforcement(t *testing.T) {
	cells := IsolationCells(testTargets())
	obs := isolated(cells)
	var want []string
	for _, c := range cells {
		if c.Expect == ExpectBlocked {
			o := ObservedOpen
			if c.Kind == KindDNSUDP || c.Kind == KindDNSTCP {
				o = ObservedAnswered
			}
			obs[c.Name] = Observation{Observed: o}
			want = append(want, c.Name)
		}
	}
	rows := Measure(cells, obs)
	if got := Differing(rows); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("differing %v, want %v", got, want)
	}
	rs := Isolation(rows)
	if len(rs) != len(want)+1 {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want)+1, rs)
	}
	last := rs[len(rs)-1]
	if last.Name != IsolationEnforcedName || last.Status != Fail || !strings.Contains(last.Reason, "does not enforce NetworkPolicy") {
		t.Errorf("summary result %+v", last)
	}
	for _, r := range rs[:len(rs)-1] {
		if r.Status != Fail || !strings.Contains(r.Reason, "expected blocked") || r.Hint == "" {
			t.Errorf("result %+v", r)
		}
	}
	if s := IsolationSummary(rows); !strings.Contains(s, "8 of 12 cells differ") || !strings.Contains(s, "plugin → API server") {
		t.Errorf("summary %q", s)
	}
}

// One broken policy fails exactly its cell, and no "nothing enforced".
func TestIsolationOneCellDiffers(t *testing.T) {
	cells := IsolationCells(testTargets())
	obs := isolated(cells)
	obs["plugin → core's plugin API"] = Observation{Observed: ObservedTimeout}
	rs := Isolation(Measure(cells, obs))
	if len(rs) != 1 || rs[0].Name != "plugin → core's plugin API" || rs[0].Status != Fail {
		t.Fatalf("results %+v", rs)
	}
	if !strings.Contains(rs[0].Reason, "expected open, observed timeout") || !strings.Contains(rs[0].Hint, "deploy/core") {
		t.Errorf("result %+v", rs[0])
	}
}

func TestIsolationUnmeasured(t *testing.T) {
	cells := IsolationCells(testTargets())
	rows := Measure(cells, nil)
	for _, r := range rows {
		if r.OK || r.Observed != ObservedError {
			t.Errorf("unmeasured row %+v", r)
		}
	}
	// Not measured is not "nothing enforced".
	for _, r := range Isolation(rows) {
		if r.Name == IsolationEnforcedName {
			t.Errorf("unmeasured cells gave %+v", r)
		}
	}
}

// What the probe said is shown escaped, in the table and the JSON.
func TestWriteTableEscapes(t *testing.T) {
	cells := IsolationCells(testTargets())
	obs := isolated(cells)
	obs["plugin → API server"] = Observation{Observed: "open\x1b[2J", Detail: "evil\u202e"}
	rows := Measure(cells, obs)
	var out bytes.Buffer
	WriteTable(&out, rows)
	if strings.ContainsAny(out.String(), "\x1b\u202e") {
		t.Errorf("raw control characters printed:\n%q", out.String())
	}
	if !strings.Contains(out.String(), SymbolFail+"  plugin → API server") {
		t.Errorf("the differing cell is not marked:\n%s", out.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, Isolation(rows), false, rows); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(js.String(), `\u001b`) || strings.Contains(js.String(), "\u202e") {
		t.Errorf("raw control characters in the JSON:\n%s", js.String())
	}
	var doc Document
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Isolation) != len(cells) || doc.Passed {
		t.Errorf("document: %d rows, passed %v", len(doc.Isolation), doc.Passed)
	}
}

// TestAtStartCells: the cells probe A tries from its first instruction are
// those it must find blocked whose targets the cluster gives before any
// probe runs: not the node's resolver (its node is not known yet) nor the
// other probe.
func TestAtStartCells(t *testing.T) {
	var got []string
	for _, c := range AtStartCells(testTargets()) {
		if c.From != ProbeA || c.Expect != ExpectBlocked || !strings.HasPrefix(c.Name, AtStartPrefix) || !strings.Contains(c.Meaning, "isolation gate") {
			t.Errorf("cell %+v", c)
		}
		got = append(got, strings.TrimPrefix(c.Name, AtStartPrefix))
	}
	want := []string{
		"plugin → cluster DNS, UDP", "plugin → cluster DNS, TCP", "plugin → address outside the cluster",
		"plugin → API server", "plugin → core's owner API",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("at-start cells %q, want %q", got, want)
	}
}
