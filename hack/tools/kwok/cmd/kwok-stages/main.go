// Command kwok-stages prints the kwok stages the dev control plane uses as one
// multi-document YAML stream: nodes become Ready and keep a heartbeat, pods
// become Running and Ready at once, finish when their containers would, and
// are removed when deleted. The text comes from the pinned kwok module, so the
// stages always match the kwok binary built next to them.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	"sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	stages := []string{
		nodefast.DefaultNodeInit,
		heartbeat.DefaultNodeHeartbeat,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	var b strings.Builder
	for i, s := range stages {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(strings.TrimSpace(s))
		b.WriteString("\n")
	}
	if _, err := os.Stdout.WriteString(b.String()); err != nil {
		fmt.Fprintln(os.Stderr, "kwok-stages:", err)
		os.Exit(1)
	}
}
