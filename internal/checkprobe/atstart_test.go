package checkprobe

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/check/probewire"
)

// TestAtStartSeesAnEarlyWindow: cells tried from the process's start,
// again and again, record that a target answered early and was refused
// later (the window the isolation gate closes, OF-42), and a target refused
// throughout records no reach. The served probe writes them where
// `at-start` prints them from.
func TestAtStartSeesAnEarlyWindow(t *testing.T) {
	srv := startDNS(t)
	closed := closedPort(t)
	cfg, err := json.Marshal(probewire.Config{AtStart: &probewire.AtStartConfig{
		WindowMillis: int(time.Since(processStart).Milliseconds()) + 800, TimeoutMillis: 100,
		Cells: []probewire.Cell{
			{Name: "dns", Kind: probewire.KindDNSUDP, Target: srv.udp},
			{Name: "closed", Kind: probewire.KindTCP, Target: closed},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	getenv := func(k string) string {
		switch k {
		case probewire.EnvConfig:
			return string(cfg)
		case "TMPDIR":
			return dir
		}
		return ""
	}
	var out, errOut lockedWriter
	if code := atStartMain(&out, &errOut, getenv); code != probewire.ExitPending {
		t.Fatalf("before the window: exit %d", code)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	startAtStart(ctx, &errOut, getenv)
	time.Sleep(300 * time.Millisecond)
	srv.stop() // the "policy" arrives
	var resp probewire.AtStartResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		out = lockedWriter{}
		if atStartMain(&out, &errOut, getenv) == probewire.ExitOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no results: %s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		t.Fatal(err)
	}
	dns, cl := resp.Results[0], resp.Results[1]
	if dns.Name != "dns" || dns.Reached == 0 || dns.FirstReachedMillis < 0 || dns.Observed[probewire.ObservedRefused] == 0 || dns.Attempts < 10 {
		t.Errorf("dns: %+v: want answers first, then refusals, many attempts", dns)
	}
	if cl.Reached != 0 || cl.FirstReachedMillis != -1 || cl.Observed[probewire.ObservedRefused] != cl.Attempts || cl.Attempts == 0 {
		t.Errorf("closed: %+v", cl)
	}
}

func TestParseConfig(t *testing.T) {
	for _, ok := range []string{``, `{}`, `{"atStart":{"cells":[{"name":"a","kind":"tcp","target":"10.0.0.1:443"}]}}`,
		`{"atStart":{"windowMillis":10000,"timeoutMillis":2000,"cells":[{"name":"a","kind":"dns-tcp","target":"10.0.0.1:53","query":"x.example"}]}}`} {
		if _, err := parseConfig(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`[]`, `{"other":1}`, `{"atStart":{"cells":[]}}`, `{} {}`,
		`{"atStart":{"windowMillis":10001,"cells":[{"name":"a","kind":"tcp","target":"10.0.0.1:443"}]}}`,
		`{"atStart":{"timeoutMillis":10,"cells":[{"name":"a","kind":"tcp","target":"10.0.0.1:443"}]}}`,
		`{"atStart":{"cells":[{"name":"a","kind":"proxy-token","host":"example.com:443"}]}}`,
		`{"atStart":{"cells":[{"name":"a","kind":"tcp","target":"10.0.0.1:443"},{"name":"a","kind":"tcp","target":"10.0.0.2:443"}]}}`,
		`{"atStart":{"cells":[{"name":"a","kind":"tcp","target":"bad target"}]}}`,
		strings.Repeat(" ", probewire.MaxConfigBytes) + `{}`,
	} {
		if _, err := parseConfig(bad); err == nil {
			t.Errorf("%.80s: accepted", bad)
		}
	}
}

// FuzzParseConfig: the config is outside input to the probe; whatever it
// holds, parseConfig returns cells that pass checkCell, of at-start kinds,
// within bounds, or an error.
func FuzzParseConfig(f *testing.F) {
	f.Add(`{"atStart":{"cells":[{"name":"a","kind":"tcp","target":"10.0.0.1:443"}]}}`)
	f.Add(`{"atStart":{"windowMillis":5,"cells":[{"name":"b","kind":"dns-udp","target":"[::1]:53","query":"a.b"}]}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := parseConfig(raw)
		if err != nil || a == nil {
			return
		}
		if a.window <= 0 || a.window > probewire.MaxWindowMillis*time.Millisecond || a.timeout < minAtStartTimeout || a.timeout > maxAtStartTimeout {
			t.Fatalf("bounds: %+v", a)
		}
		for _, c := range a.cells {
			if err := checkCell(c); err != nil || strings.HasPrefix(string(c.Kind), "proxy") {
				t.Fatalf("cell %+v: %v", c, err)
			}
		}
	})
}
