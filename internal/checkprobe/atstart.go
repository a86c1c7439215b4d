package checkprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/arkadiuss/openfief/internal/boundedfile"
	"github.com/arkadiuss/openfief/internal/check/probewire"
)

// processStart is as early as a Go program can note the time: package
// variables are set before any init function or main. The at-start cells
// count their milliseconds from it.
var processStart = time.Now()

// Bounds of one at-start attempt.
const (
	defaultAtStartTimeout = 300 * time.Millisecond
	maxAtStartTimeout     = 2 * time.Second
	minAtStartTimeout     = 50 * time.Millisecond
	// atStartPause is the wait between two attempts of one cell.
	atStartPause = 2 * time.Millisecond
)

// atStartFile is where the served probe leaves its at-start results: the
// pod's /tmp (an emptyDir), under TMPDIR when set.
func atStartFile(getenv func(string) string) string {
	dir := getenv("TMPDIR")
	if dir == "" {
		dir = "/tmp"
	}
	return filepath.Join(dir, "openfief-check-probe-at-start.json")
}

// atStart is a parsed, valid probewire.AtStartConfig.
type atStart struct {
	window  time.Duration
	timeout time.Duration
	cells   []probewire.Cell
}

// parseConfig reads the probe's OPENFIEF_CONFIG strictly, as it reads a
// request: bounded, one object, no unknown field; at-start cells are tcp
// or dns cells only, checked like a request's. An empty config is no
// at-start cells.
func parseConfig(raw string) (*atStart, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	if len(raw) > probewire.MaxConfigBytes {
		return nil, fmt.Errorf("the config is %d bytes, more than %d", len(raw), probewire.MaxConfigBytes)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var cfg probewire.Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("the config: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("the config has data after its JSON object")
	}
	if cfg.AtStart == nil {
		return nil, nil
	}
	a := cfg.AtStart
	out := &atStart{window: time.Duration(probewire.DefaultWindowMillis) * time.Millisecond, timeout: defaultAtStartTimeout}
	switch {
	case a.WindowMillis < 0 || a.WindowMillis > probewire.MaxWindowMillis:
		return nil, fmt.Errorf("atStart.windowMillis %d: want 0 to %d", a.WindowMillis, probewire.MaxWindowMillis)
	case a.WindowMillis > 0:
		out.window = time.Duration(a.WindowMillis) * time.Millisecond
	}
	if a.TimeoutMillis != 0 {
		out.timeout = time.Duration(a.TimeoutMillis) * time.Millisecond
		if out.timeout < minAtStartTimeout || out.timeout > maxAtStartTimeout {
			return nil, fmt.Errorf("atStart.timeoutMillis %d: want %d to %d", a.TimeoutMillis, minAtStartTimeout.Milliseconds(), maxAtStartTimeout.Milliseconds())
		}
	}
	if n := len(a.Cells); n == 0 || n > probewire.MaxCells {
		return nil, fmt.Errorf("atStart.cells: want 1 to %d", probewire.MaxCells)
	}
	names := map[string]bool{}
	for i, c := range a.Cells {
		switch c.Kind {
		case probewire.KindTCP, probewire.KindDNSUDP, probewire.KindDNSTCP:
		default:
			return nil, fmt.Errorf("atStart.cells[%d]: kind %q: at start only %s, %s and %s", i, c.Kind, probewire.KindTCP, probewire.KindDNSUDP, probewire.KindDNSTCP)
		}
		if err := checkCell(c); err != nil {
			return nil, fmt.Errorf("atStart.cells[%d]: %w", i, err)
		}
		if names[c.Name] {
			return nil, fmt.Errorf("atStart.cells[%d]: the name %q is used twice", i, c.Name)
		}
		names[c.Name] = true
	}
	out.cells = a.Cells
	return out, nil
}

// runAtStart tries each cell again and again, concurrently, until the
// window after processStart ends (or ctx does), and returns what each saw.
func runAtStart(ctx context.Context, a *atStart, env Env) probewire.AtStartResponse {
	end := processStart.Add(a.window)
	out := probewire.AtStartResponse{WindowMillis: int(a.window.Milliseconds()), Results: make([]probewire.AtStartResult, len(a.cells))}
	var wg sync.WaitGroup
	for i, c := range a.cells {
		wg.Go(func() {
			r := probewire.AtStartResult{Name: c.Name, FirstMillis: -1, FirstReachedMillis: -1, Observed: map[string]int{}}
			for ctx.Err() == nil && time.Now().Before(end) {
				began := time.Since(processStart).Milliseconds()
				if r.FirstMillis < 0 {
					r.FirstMillis = began
				}
				actx, cancel := context.WithTimeout(ctx, a.timeout)
				observed, detail := try(actx, c, env)
				cancel()
				r.Attempts++
				r.Observed[observed]++
				if observed == probewire.ObservedOpen || observed == probewire.ObservedAnswered {
					if r.Reached == 0 {
						r.FirstReachedMillis = began
					}
					r.Reached++
					r.Detail = cleanDetail(detail)
				} else if r.Reached == 0 {
					r.Detail = cleanDetail(detail)
				}
				time.Sleep(atStartPause)
			}
			out.Results[i] = r
		})
	}
	wg.Wait()
	return out
}

// startAtStart runs the config's at-start cells in the background, if it
// has any, and writes their results to atStartFile once the window ends;
// a config it cannot read is reported on stderr and tried no further (the
// probe still serves, so the check sees the probe run and reports the
// missing results).
func startAtStart(ctx context.Context, stderr io.Writer, getenv func(string) string) {
	a, err := parseConfig(getenv(probewire.EnvConfig))
	if err != nil {
		fmt.Fprintln(stderr, "check-probe: at start:", err)
		return
	}
	if a == nil {
		return
	}
	path := atStartFile(getenv)
	go func() {
		raw, err := json.Marshal(runAtStart(ctx, a, EnvFrom(getenv)))
		if err == nil {
			err = writeWhole(path, raw)
		}
		if err != nil {
			fmt.Fprintln(stderr, "check-probe: at start:", err)
		}
	}()
}

// writeWhole writes raw to path through a rename, so a reader never sees
// half of it.
func writeWhole(path string, raw []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// atStartMain is `check-probe at-start`: the results once the window has
// ended (exit probewire.ExitOK), else nothing and probewire.ExitPending.
func atStartMain(stdout, stderr io.Writer, getenv func(string) string) int {
	raw, err := boundedfile.Read(atStartFile(getenv), probewire.MaxRequestBytes*4)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(stderr, "check-probe: no at-start results yet")
		return probewire.ExitPending
	}
	if err != nil {
		fmt.Fprintln(stderr, "check-probe:", err)
		return probewire.ExitFailed
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", raw); err != nil {
		return probewire.ExitFailed
	}
	return probewire.ExitOK
}
