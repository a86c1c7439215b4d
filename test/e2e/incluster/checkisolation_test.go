//go:build cluster

package incluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// testCheckIsolation runs `openfief check --isolation` as an owner would,
// with the probe image the platform was built with from this tree (a
// development CLI pins none, so it is passed with --probe-image; its label
// is the probe manifest compiled into the CLI), on the real node:
//   - interrupted twice, as the real command in a process of its own: by
//     Ctrl-C (SIGINT) once its probes exist, after which nothing of them
//     is left; then by SIGKILL, which leaves them;
//   - then to the end: it removes what the killed run left, every cell is
//     as expected (exit 0), and nothing of its probes is left;
//   - with the core's NetworkPolicy broken (its ingress from plugins names
//     a label no plugin has): exit 1, and exactly the cell "plugin → core's
//     plugin API" differs;
//   - with the node's NetworkPolicy controller stopped: exit 1, every cell
//     a plugin must not reach differs, and the check says the network
//     plugin does not enforce NetworkPolicy.
//
// The address outside the cluster is the NBP stand-in, which listens, so
// an unpoliced plugin does reach it; example.com, the probe's granted
// host, is a stand-in address with nothing listening, so the proxy answers
// 502 once it has admitted the tunnel.
func testCheckIsolation(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	if _, err := e.c.StandIn("example.com"); err != nil {
		t.Fatalf("a stand-in for example.com: %v", err)
	}
	ref := releaseProbe(t, e)
	args := []string{"check", "--isolation", "--probe-image", ref.String(), "--outside-address", e.nbp.Addr(), "--insecure-registry", ref.Registry()}
	dyn, err := dynamic.NewForConfig(e.c.Config)
	must(t, err)

	// Ctrl-C and SIGKILL, to a real process.
	bin := filepath.Join(t.TempDir(), "openfief")
	build := exec.Command("go", "build", "-o", bin, "./cmd/openfief")
	build.Dir = e.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building openfief: %v\n%s", err, out)
	}
	interrupt := func(sig syscall.Signal) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
		stderr, err := cmd.StderrPipe()
		must(t, err)
		must(t, cmd.Start())
		done := make(chan struct{})
		var log strings.Builder
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
			}
		}()
		testutil.Eventually(t, time.Minute, "a pod of the check's probes", func() (bool, string) {
			left := checkLeftovers(t, e, dyn)
			return slices.ContainsFunc(left, func(s string) bool { return strings.HasPrefix(s, "pod/") }), fmt.Sprint(left)
		})
		must(t, cmd.Process.Signal(sig))
		waited := make(chan error, 1)
		go func() { <-done; waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			t.Logf("openfief %s after %s: %v\n%s", strings.Join(args, " "), sig, err, log.String())
		case <-time.After(90 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("openfief check did not end within 90 s of %s\n%s", sig, log.String())
		}
	}
	interrupt(syscall.SIGINT)
	if left := checkLeftovers(t, e, dyn); len(left) > 0 {
		t.Errorf("after Ctrl-C the check left %v", left)
	}
	interrupt(syscall.SIGKILL)
	if left := checkLeftovers(t, e, dyn); len(left) == 0 {
		t.Errorf("a check killed outright left nothing: was it killed before it created its probes?")
	}

	// To the end: it removes what the killed run left and passes.
	// Standard output holds the JSON document and nothing else: progress
	// goes to standard error.
	start := time.Now()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, append([]string{"--kubeconfig", e.kubeconfig}, append(args, "-o", "json")...),
		cli.Streams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr})
	took := time.Since(start)
	out := stderr.String() + stdout.String()
	var doc check.Document
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("check --isolation -o json (exit %d): standard output is not one JSON document: %v\n%s", code, err, out)
	}
	t.Logf("openfief check --isolation: exit %d in %s", code, took.Round(100*time.Millisecond))
	if code != cli.ExitOK || !doc.Passed {
		t.Errorf("check --isolation on an isolating cluster: exit %d, passed %v\n%s", code, doc.Passed, out)
	}
	atStart := 0
	for _, r := range doc.Isolation {
		if strings.HasPrefix(r.Name, check.AtStartPrefix) {
			atStart++
		}
	}
	if len(doc.Isolation) != 17 || atStart != 5 {
		t.Errorf("the truth table has %d cells, %d of them at start; want 17 and 5", len(doc.Isolation), atStart)
	}
	for _, r := range doc.Isolation {
		if !r.OK {
			t.Errorf("cell %q: expected %s, observed %s (%s)", r.Name, r.Expect, r.Observed, r.Detail)
		}
	}
	if !strings.Contains(out, "interrupted check left") {
		t.Errorf("the check did not say it removed what the killed run left:\n%s", out)
	}
	if left := checkLeftovers(t, e, dyn); len(left) > 0 {
		t.Errorf("after a check that ran to the end: %v", left)
	}
	code, text := e.cli(ctx, args...)
	t.Logf("openfief %s: exit %d\n%s", strings.Join(args, " "), code, text)
	if code != cli.ExitOK || !strings.Contains(text, "Isolation truth table") || !strings.Contains(text, check.SymbolOK+" "+check.IsolationEnforcedName+": all 17 cells as expected") {
		t.Errorf("check --isolation as text: exit %d\n%s", code, text)
	}

	// One of the platform's policies broken: exactly its cell differs.
	pols := e.cs.NetworkingV1().NetworkPolicies(plugins.Namespace)
	orig, err := pols.Get(ctx, "openfief-core", metav1.GetOptions{})
	must(t, err)
	broken := orig.DeepCopy()
	if n := renamePluginPeers(broken, "not-a-plugin"); n == 0 {
		t.Fatalf("the core's NetworkPolicy admits no peer labelled %s=%s", plugins.LabelName, plugins.ValuePluginName)
	}
	_, err = pols.Update(ctx, broken, metav1.UpdateOptions{})
	must(t, err)
	start = time.Now()
	code, out = e.cli(ctx, append(args, "--settle", "5s", "-o", "json")...)
	restorePolicy(t, e, orig)
	doc = isolationDoc(t, code, out)
	t.Logf("with the core's policy broken: exit %d in %s, differing %q", code, time.Since(start).Round(100*time.Millisecond), differing(doc))
	if got, want := differing(doc), []string{"plugin → core's plugin API"}; code != cli.ExitFailure || !slices.Equal(got, want) {
		t.Errorf("with the core's policy broken: exit %d, differing %q, want exit %d and %q\n%s", code, got, cli.ExitFailure, want, out)
	}

	// No NetworkPolicy controller: no plugin runs at all, the probes
	// included. Their isolation gate (OF-42) finds everything reachable
	// until its deadline, and the check says so.
	must(t, e.c.StopNetworkPolicy(ctx))
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			must(t, e.c.StartNetworkPolicy(ctx))
		}
	}
	defer restart()
	start = time.Now()
	code, out = e.cli(ctx, append(args, "--settle", "3s", "-o", "json")...)
	took = time.Since(start)
	restart()
	doc = isolationDoc(t, code, out)
	t.Logf("without a NetworkPolicy controller: exit %d in %s", code, took.Round(100*time.Millisecond))
	if code != cli.ExitFailure || len(doc.Isolation) != 0 || !slices.ContainsFunc(doc.Checks, func(r check.Result) bool {
		return r.Name == check.IsolationEnforcedName && r.Status == check.Fail && strings.Contains(r.Reason, "isolation gate") && strings.Contains(r.Reason, "still reachable")
	}) {
		t.Errorf("without a NetworkPolicy controller: exit %d, want %d and the probes' isolation gate named as never passing\n%s", code, cli.ExitFailure, out)
	}
	if left := checkLeftovers(t, e, dyn); len(left) > 0 {
		t.Errorf("after the failing checks: %v", left)
	}
}

// releaseProbe is the probe image the installed release built, as its
// ConfigMap names it for people and tools (the CLI does not read it).
func releaseProbe(t *testing.T, e *platformEnv) plugins.ImageRef {
	t.Helper()
	cm, err := e.cs.CoreV1().ConfigMaps(plugins.Namespace).Get(context.Background(), deploy.ReleaseConfigMap, metav1.GetOptions{})
	must(t, err)
	ref, err := plugins.ParseImageRef(cm.Data[deploy.ReleaseKeyCheckProbe])
	if err != nil {
		t.Fatalf("the release ConfigMap's probe image: %v (%v)", err, cm.Data)
	}
	return ref
}

func isolationDoc(t *testing.T, code int, out string) check.Document {
	t.Helper()
	var doc check.Document
	// Progress and the Error: line go to the same buffer in e.cli: the
	// document is the JSON value after the progress lines.
	i := strings.Index(out, "{\n")
	if i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&doc) != nil {
		t.Fatalf("check --isolation -o json (exit %d) printed no document:\n%s", code, out)
	}
	return doc
}

func differing(doc check.Document) []string {
	var out []string
	for _, r := range doc.Isolation {
		if !r.OK {
			out = append(out, r.Name)
		}
	}
	return out
}

// renamePluginPeers makes every ingress peer of p that selects plugin pods
// select label value instead, and says how many it changed.
func renamePluginPeers(p *networkingv1.NetworkPolicy, value string) int {
	n := 0
	for i := range p.Spec.Ingress {
		for j := range p.Spec.Ingress[i].From {
			sel := p.Spec.Ingress[i].From[j].PodSelector
			if sel != nil && sel.MatchLabels[plugins.LabelName] == plugins.ValuePluginName {
				sel.MatchLabels[plugins.LabelName] = value
				n++
			}
		}
	}
	return n
}

// restorePolicy puts the core's NetworkPolicy back as it was.
func restorePolicy(t *testing.T, e *platformEnv, orig *networkingv1.NetworkPolicy) {
	t.Helper()
	pols := e.cs.NetworkingV1().NetworkPolicies(plugins.Namespace)
	cur, err := pols.Get(context.Background(), orig.Name, metav1.GetOptions{})
	must(t, err)
	cur.Spec = orig.Spec
	_, err = pols.Update(context.Background(), cur, metav1.UpdateOptions{})
	must(t, err)
}

// checkLeftovers lists what any check run left in the platform namespace:
// Plugins and PluginGrants labelled cli.LabelCheckRun, and the workload
// objects and pods of plugins named check-*.
func checkLeftovers(t *testing.T, e *platformEnv, dyn dynamic.Interface) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, res := range []string{"plugins", "plugingrants"} {
		gvr := schema.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Resource: res}
		l, err := dyn.Resource(gvr).Namespace(plugins.Namespace).List(ctx, metav1.ListOptions{LabelSelector: cli.LabelCheckRun})
		must(t, err)
		for _, u := range l.Items {
			out = append(out, res+"/"+u.GetName())
		}
	}
	isProbe := func(m metav1.Object) bool { return strings.HasPrefix(m.GetLabels()[plugins.LabelPluginName], "check-") }
	pods, err := e.cs.CoreV1().Pods(plugins.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for i := range pods.Items {
		if isProbe(&pods.Items[i]) {
			out = append(out, "pod/"+pods.Items[i].Name)
		}
	}
	deps, err := e.cs.AppsV1().Deployments(plugins.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for i := range deps.Items {
		if isProbe(&deps.Items[i]) {
			out = append(out, "deployment/"+deps.Items[i].Name)
		}
	}
	nps, err := e.cs.NetworkingV1().NetworkPolicies(plugins.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for i := range nps.Items {
		if isProbe(&nps.Items[i]) {
			out = append(out, "networkpolicy/"+nps.Items[i].Name)
		}
	}
	var sas *corev1.ServiceAccountList
	sas, err = e.cs.CoreV1().ServiceAccounts(plugins.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for i := range sas.Items {
		if isProbe(&sas.Items[i]) {
			out = append(out, "serviceaccount/"+sas.Items[i].Name)
		}
	}
	slices.Sort(out)
	return out
}
