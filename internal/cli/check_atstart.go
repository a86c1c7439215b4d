package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/check/probewire"
)

// The at-start cells' timing (OF-42): probe A tries them from its first
// instruction until atStartWindow after its process started, each attempt
// bounded by atStartTimeout; the results are read at most atStartWait
// after the measuring ends.
const (
	atStartWindow  = 3 * time.Second
	atStartTimeout = 300 * time.Millisecond
	atStartWait    = 30 * time.Second
)

// probeAtStartConfig is probe A's config: the at-start cells, each by a
// short id the probe takes (cells' names are the owner's words), and the
// ids' cell names.
func probeAtStartConfig(cells []check.Cell) (*apiextensionsv1.JSON, map[string]string, error) {
	cfg := probewire.AtStartConfig{WindowMillis: int(atStartWindow.Milliseconds()), TimeoutMillis: int(atStartTimeout.Milliseconds())}
	ids := map[string]string{}
	for i, c := range cells {
		id := fmt.Sprintf("start-%02d", i)
		ids[id] = c.Name
		cfg.Cells = append(cfg.Cells, probewire.Cell{Name: id, Kind: c.Kind, Target: c.Target, Query: c.Query})
	}
	raw, err := json.Marshal(probewire.Config{AtStart: &cfg})
	if err != nil {
		return nil, nil, err
	}
	return &apiextensionsv1.JSON{Raw: raw}, ids, nil
}

// readAtStart asks the probe in pod for its at-start results until its
// window has ended, and turns each into an observation: open (or answered)
// if any attempt reached its target, with when; else what most attempts
// met. The answer is outside input: bounded and parsed strictly.
func readAtStart(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, pod *corev1.Pod, ids map[string]string) (map[string]check.Observation, error) {
	deadline := time.Now().Add(atStartWait)
	for {
		stdout, err := probeExec(ctx, cfg, cs, pod, []string{probewire.Binary, probewire.AtStart}, 15*time.Second)
		if err == nil {
			var resp probewire.AtStartResponse
			dec := json.NewDecoder(stdout)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&resp); err != nil {
				return nil, exitf(ExitFailure, "the probe in pod %s answered what is not its at-start JSON: %w", pod.Name, err)
			}
			return atStartObservations(resp, ids), nil
		}
		if time.Now().After(deadline) {
			return nil, exitf(ExitFailure, "the probe in pod %s gave no at-start results within %v: %w", pod.Name, atStartWait, err)
		}
		select {
		case <-ctx.Done():
			return nil, exitf(ExitFailure, "interrupted while reading the at-start results: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// atStartObservations maps the probe's results back to cell names.
func atStartObservations(resp probewire.AtStartResponse, ids map[string]string) map[string]check.Observation {
	out := map[string]check.Observation{}
	for _, r := range resp.Results {
		name, ok := ids[r.Name]
		if !ok {
			continue
		}
		if r.Reached > 0 {
			observed := check.ObservedOpen
			if r.Observed[check.ObservedAnswered] > 0 {
				observed = check.ObservedAnswered
			}
			out[name] = check.Observation{Observed: observed, Detail: fmt.Sprintf("reached %d of %d attempts, the first %d ms after the probe started", r.Reached, r.Attempts, r.FirstReachedMillis)}
			continue
		}
		if r.Attempts == 0 {
			out[name] = check.Observation{Observed: check.ObservedError, Detail: "never tried"}
			continue
		}
		most, n := check.ObservedError, 0
		for _, o := range []string{check.ObservedRefused, check.ObservedTimeout, check.ObservedError} {
			if r.Observed[o] > n {
				most, n = o, r.Observed[o]
			}
		}
		out[name] = check.Observation{Observed: most, Detail: fmt.Sprintf("%d attempts from %d ms to %d ms after the probe started, none reached it", r.Attempts, r.FirstMillis, resp.WindowMillis)}
	}
	return out
}
