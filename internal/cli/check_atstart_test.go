package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/configschema"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestAtStartObservations: one attempt that reached its target during the
// window makes the cell open (or answered), with when; otherwise the cell
// is what most attempts met; a cell never tried is an error; results under
// ids the CLI did not give are dropped.
func TestAtStartObservations(t *testing.T) {
	ids := map[string]string{"start-00": "at start: dns", "start-01": "at start: api", "start-02": "at start: never", "start-03": "at start: dns-tcp"}
	got := atStartObservations(probewire.AtStartResponse{WindowMillis: 3000, Results: []probewire.AtStartResult{
		{Name: "start-00", Attempts: 40, Reached: 1, FirstReachedMillis: 2, Observed: map[string]int{"answered": 1, "refused": 39}},
		{Name: "start-01", Attempts: 20, FirstMillis: 1, FirstReachedMillis: -1, Observed: map[string]int{"refused": 3, "timeout": 17}},
		{Name: "start-02", FirstReachedMillis: -1},
		{Name: "start-03", Attempts: 9, Reached: 2, FirstReachedMillis: 5, Observed: map[string]int{"open": 2, "timeout": 7}},
		{Name: "start-99", Attempts: 1, Reached: 1},
	}}, ids)
	want := map[string]string{"at start: dns": "answered", "at start: api": "timeout", "at start: never": "error", "at start: dns-tcp": "open"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for name, obs := range want {
		if got[name].Observed != obs {
			t.Errorf("%s: %+v, want %s", name, got[name], obs)
		}
	}
	if d := got["at start: dns"].Detail; !strings.Contains(d, "reached 1 of 40 attempts, the first 2 ms") {
		t.Errorf("detail %q", d)
	}
	if check.ExpectBlocked.Matches(got["at start: dns"].Observed) || !check.ExpectBlocked.Matches(got["at start: api"].Observed) {
		t.Error("expectations")
	}
}

// TestProbeAtStartConfig: probe A's config holds the at-start cells under
// short ids, in the probe's own JSON, with the window and timeout, and
// names nothing else.
func TestProbeAtStartConfig(t *testing.T) {
	cells := check.AtStartCells(check.Targets{ClusterDNS: "10.0.0.10:53", Outside: "192.175.48.5:443", APIServer: "10.0.0.1:443", CoreOwner: "10.1.0.3:8081", DNSQuery: "kubernetes.default.svc.cluster.local."})
	raw, ids, err := probeAtStartConfig(cells)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw.Raw)))
	dec.DisallowUnknownFields()
	var cfg probewire.Config
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.AtStart == nil || len(cfg.AtStart.Cells) != len(cells) || len(ids) != len(cells) || cfg.AtStart.WindowMillis != 3000 {
		t.Fatalf("config %s, ids %v", raw.Raw, ids)
	}
	for _, c := range cfg.AtStart.Cells {
		if ids[c.Name] == "" || c.Host != "" {
			t.Errorf("cell %+v", c)
		}
	}
	// The operator checks it against the probe's manifest: it must pass.
	m, err := plugins.ParseManifestLabel(probewire.ProbeManifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := configschema.Validate(m.ConfigSchema, raw.Raw); err != nil {
		t.Errorf("probe A's config does not meet the probe's config schema: %v", err)
	}
}
