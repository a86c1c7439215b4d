//go:build cluster

package incluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// imageSignaturesLine is the one check `openfief check` does not make yet:
// a warning on every cluster.
const imageSignaturesLine = "! image signatures: not checked yet: the platform's images are not verified against the release signer by this command"

// testCheck runs `openfief check` on the installed platform: every check
// passes (the image signatures are a warning, not checked yet), in text
// and in JSON, and names each part of the platform. Then it scales the
// core's Deployment to 0: the check fails naming that Deployment, with
// exit 1; scaled back and Available again, the check passes again.
func testCheck(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	start := time.Now()
	code, out := e.cli(ctx, "check")
	t.Logf("openfief check: exit %d in %s\n%s", code, time.Since(start).Round(100*time.Millisecond), out)
	if code != cli.ExitOK {
		t.Errorf("openfief check exited %d, want 0", code)
	}
	lines := checkLines(out)
	for _, l := range lines {
		if !strings.HasPrefix(l, check.SymbolOK+" ") && l != imageSignaturesLine {
			t.Errorf("check line %q does not pass", l)
		}
	}
	for _, name := range []string{"installed", "deployment openfief-core", "deployment openfief-egress-proxy", "deployment openfief-operator",
		"admission binding openfief-workload-identities", "admission binding openfief-service-account-tokens",
		"signing keys " + plugins.TokenKeysConfigMap, "allow-list " + plugins.AllowListConfigMap, "core answers", "core store", check.TrustRootName,
		"crd plugins.openfief.io", "crd plugingrants.openfief.io", "version"} {
		if !hasCheck(lines, check.SymbolOK+" "+name+":") {
			t.Errorf("openfief check has no passing line for %q", name)
		}
	}
	for name, image := range platformDeployments {
		if want := fmt.Sprintf("%s deployment %s: Available", check.SymbolOK, name); !strings.Contains(lineStarting(lines, want), e.refs[image].String()) {
			t.Errorf("the check of %s does not name its pinned image %s: %q", name, e.refs[image], lineStarting(lines, want))
		}
	}

	code, out = e.cli(ctx, "check", "-o", "json")
	var doc check.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("check -o json (exit %d): %v\n%s", code, err, out)
	}
	if code != cli.ExitOK || !doc.Passed || doc.Pre || len(doc.Checks) != len(lines) {
		t.Errorf("check -o json: exit %d, passed %v, pre %v, %d checks (the text has %d)\n%s", code, doc.Passed, doc.Pre, len(doc.Checks), len(lines), out)
	}
	for _, c := range doc.Checks {
		if c.Status != check.OK && c.Name != "image signatures" {
			t.Errorf("check -o json: %s/%s is %s: %s", c.Group, c.Name, c.Status, c.Reason)
		}
	}

	// Break one thing: no core runs.
	deps := e.cs.AppsV1().Deployments(plugins.Namespace)
	d, err := deps.Get(ctx, "openfief-core", metav1.GetOptions{})
	must(t, err)
	replicas := *d.Spec.Replicas
	scale := func(n int32) {
		t.Helper()
		_, err := deps.UpdateScale(ctx, "openfief-core", &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "openfief-core", Namespace: plugins.Namespace},
			Spec:       autoscalingv1.ScaleSpec{Replicas: n}}, metav1.UpdateOptions{})
		must(t, err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		scale(replicas)
		testutil.Eventually(t, 3*time.Minute, "openfief-core Available again", func() (bool, string) {
			d, err := deps.Get(ctx, "openfief-core", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return platform.DeploymentAvailable(d), fmt.Sprintf("%d/%d available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		})
	}
	t.Cleanup(restore)
	scale(0)
	testutil.Eventually(t, 2*time.Minute, "openfief-core scaled to 0 with no pod left", func() (bool, string) {
		d, err := deps.Get(ctx, "openfief-core", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == 0, fmt.Sprintf("%d replicas", d.Status.Replicas)
	})
	code, out = e.cli(ctx, "check")
	t.Logf("openfief check with the core scaled to 0: exit %d\n%s", code, out)
	lines = checkLines(out)
	if code != cli.ExitFailure {
		t.Errorf("check with the core scaled to 0 exited %d, want %d", code, cli.ExitFailure)
	}
	for _, want := range []string{
		check.SymbolFail + " deployment openfief-core: scaled to 0 replicas: nothing runs it",
		check.SymbolFail + " core answers: no openfief-core answered (HTTP 503)",
		check.SymbolFail + " core store: not checked: the core does not answer",
	} {
		if !hasCheck(lines, want) {
			t.Errorf("check with the core scaled to 0 lacks a line starting %q", want)
		}
	}
	if !strings.Contains(out, "Error: 3 checks failed, the first: deployment openfief-core") {
		t.Errorf("check with the core scaled to 0 does not name the Deployment first in its error")
	}
	for _, l := range lines {
		if strings.HasPrefix(l, check.SymbolFail) && !strings.Contains(l, "core") {
			t.Errorf("check with the core scaled to 0 fails %q too", l)
		}
	}

	// Restored: the check passes again once the core answers.
	restore()
	testutil.Eventually(t, 2*time.Minute, "openfief check passing again", func() (bool, string) {
		code, out := e.cli(ctx, "check")
		return code == cli.ExitOK, out
	})
}

// checkLines are the check lines of check's text output, without the
// indent, headings, fix lines and summary.
func checkLines(out string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		for _, s := range []string{check.SymbolOK, check.SymbolFail, check.SymbolWarn} {
			if strings.HasPrefix(line, "  "+s+" ") {
				lines = append(lines, strings.TrimPrefix(line, "  "))
			}
		}
	}
	return lines
}

// hasCheck reports whether a line of lines starts with prefix.
func hasCheck(lines []string, prefix string) bool { return lineStarting(lines, prefix) != "" }

// lineStarting is the first of lines that starts with prefix, "" when none.
func lineStarting(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
