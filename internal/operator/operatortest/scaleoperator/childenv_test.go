package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadChildEnv(t *testing.T) {
	full := map[string]string{
		kubeconfigEnv: "/tmp/kubeconfig",
		qpsEnv:        "50",
		burstEnv:      "100",
		metricsEnv:    "127.0.0.1:1",
		pprofEnv:      "127.0.0.1:2",
		gateImageEnv:  "registry.example.com/openfief/check-probe@sha256:00",
	}
	with := func(key, value string) func(string) string {
		return func(k string) string {
			if k == key {
				return value
			}
			return full[k]
		}
	}
	e, err := readChildEnv(with(workersEnv, "16"))
	if err != nil {
		t.Fatal(err)
	}
	if e.kubeconfig != "/tmp/kubeconfig" || e.qps != 50 || e.burst != 100 || e.metrics != "127.0.0.1:1" ||
		e.pprof != "127.0.0.1:2" || e.workers != 16 || e.cgroup != "" {
		t.Errorf("readChildEnv = %+v", e)
	}
	if e, err := readChildEnv(with(pprofEnv, "")); err != nil || e.pprof != "" || e.workers != 0 {
		t.Errorf("without pprof and workers: %+v, %v", e, err)
	}
	for name, tc := range map[string]struct{ key, value string }{
		"no kubeconfig":   {kubeconfigEnv, ""},
		"no metrics":      {metricsEnv, ""},
		"no gate image":   {gateImageEnv, ""},
		"qps not number":  {qpsEnv, "fast"},
		"qps zero":        {qpsEnv, "0"},
		"burst missing":   {burstEnv, ""},
		"burst negative":  {burstEnv, "-1"},
		"workers not int": {workersEnv, "four"},
		"workers zero":    {workersEnv, "0"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readChildEnv(with(tc.key, tc.value))
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("err = %v, want one naming %s", err, tc.key)
			}
		})
	}
}

// TestWaitUntilMoved waits on a real pipe: not before its writer closes it.
func TestWaitUntilMoved(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	done := make(chan error, 1)
	go func() { done <- waitUntilMoved(r) }()
	select {
	case err := <-done:
		t.Fatalf("returned before the pipe was closed: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting 10 s after the pipe was closed")
	}
}
