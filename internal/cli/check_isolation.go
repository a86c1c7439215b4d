package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/check"
	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// LabelCheckRun marks the Plugins and PluginGrants `openfief check
// --isolation` creates, with its run's id: the check deletes only objects
// that carry it, and removes those an interrupted run left; the core calls
// none of them (plugins.LabelCheckRun).
const LabelCheckRun = plugins.LabelCheckRun

// isolationOptions are --isolation's flags.
type isolationOptions struct {
	probeImage string
	outside    string
	settle     time.Duration
	trust      trustFlags
}

// The probe's fixed facts: the hosts its manifest asks for and does not,
// and the name its DNS cells ask for.
const (
	probeGrantedHost = "example.com:443"
	probeDeniedHost  = "example.org:443"
	probeDNSQuery    = probewire.DefaultDNSQuery
	// probeCellTimeout bounds each cell inside the probe.
	probeCellTimeout = 4 * time.Second
	// maxProbeOutput bounds what is read of a probe's answer.
	maxProbeOutput = 64 << 10
	// cleanupTimeout bounds the removal of the probes, even after Ctrl-C.
	cleanupTimeout = 45 * time.Second
)

// isolation runs the probes and returns the measured truth table; the
// command has refused any namespace but the platform's already. Every
// object it creates carries LabelCheckRun and is deleted before it returns,
// whatever happened, on a context of its own, so a Ctrl-C (which cancels
// ctx) still cleans up.
func (e *Env) isolation(ctx context.Context, o isolationOptions) (rows []check.Row, err error) {
	r, err := e.newIsolationRun(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		fmt.Fprintln(e.ErrOut, "Removing the probes...")
		if cerr := e.removeProbes(cctx, r.c, r.id); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	targets, err := e.isolationTargets(ctx, r.c, o.outside)
	if err != nil {
		return nil, err
	}
	// Probe A tries these from its first instruction (OF-42).
	atStart := check.AtStartCells(targets)
	atStartConfig, atStartIDs, err := probeAtStartConfig(atStart)
	if err != nil {
		return nil, err
	}
	if err := r.startProbes(ctx, atStartConfig); err != nil {
		return nil, err
	}
	pods := map[string]*corev1.Pod{}
	for _, from := range []string{check.ProbeA, check.ProbeB} {
		pod, err := e.waitProbe(ctx, r.c, r.names[from])
		if err != nil {
			return nil, err
		}
		pods[from] = pod
	}
	cells := check.IsolationCells(withProbes(targets, pods))

	fmt.Fprintln(e.ErrOut, "Measuring...")
	if rows, err = r.measure(ctx, cells, pods, o.settle); err != nil {
		return nil, err
	}
	// The at-start cells are what the first seconds were.
	first, err := readAtStart(ctx, r.cfg, r.cs, pods[check.ProbeA], atStartIDs)
	if err != nil {
		return nil, err
	}
	return append(check.Measure(atStart, first), rows...), nil
}

// isolationRun is one run of `openfief check --isolation`: the clients it
// works through, the probe image and manifest it checked, the run's id and
// the names of its two probes.
type isolationRun struct {
	env *Env
	c   client.Client
	cfg *rest.Config
	cs  kubernetes.Interface
	ref plugins.ImageRef
	m   plugins.Manifest
	// id is the run's LabelCheckRun value.
	id string
	// names are the probes' Plugin names by check.ProbeA and check.ProbeB.
	names map[string]string
}

// newIsolationRun connects, removes the probes interrupted runs left, and
// checks the probe image as plugin install checks an image (its signed
// label must be exactly the probe manifest) before it picks the run's id.
// Nothing of the run exists yet when it returns.
func (e *Env) newIsolationRun(ctx context.Context, o isolationOptions) (*isolationRun, error) {
	r := &isolationRun{env: e}
	var err error
	if r.c, err = e.Client(); err != nil {
		return nil, err
	}
	if r.cfg, err = e.RESTConfig(); err != nil {
		return nil, err
	}
	if r.cs, err = kubernetes.NewForConfig(r.cfg); err != nil {
		return nil, exitf(ExitFailure, "connecting to the API server: %w", err)
	}
	if r.ref, err = probeImageFor(o.probeImage); err != nil {
		return nil, err
	}
	if r.m, err = probeManifest(); err != nil {
		return nil, err
	}
	if err := e.removeProbes(ctx, r.c, ""); err != nil {
		return nil, err
	}
	// Checked as plugin install checks an image, without its report on
	// standard output, which holds only the check's document.
	t, err := e.trustForCluster(ctx, r.c, o.trust)
	if err != nil {
		return nil, err
	}
	res, err := e.checkImage(ctx, r.ref, t, o.trust)
	if err == nil {
		err = res.refusal()
	}
	if err != nil {
		return nil, fmt.Errorf("the probe image %s: %w", shortImage(r.ref.String()), err)
	}
	if err := checkProbeLabel(r.ref, res.Manifest, r.m); err != nil {
		return nil, err
	}
	if r.id, err = newRunID(); err != nil {
		return nil, err
	}
	r.names = map[string]string{check.ProbeA: "check-" + r.id + "-a", check.ProbeB: "check-" + r.id + "-b"}
	return r, nil
}

// startProbes creates both probes' Plugins and PluginGrants, labelled with
// the run's id; probe A gets atStartConfig, the cells it tries first.
func (r *isolationRun) startProbes(ctx context.Context, atStartConfig *apiextensionsv1.JSON) error {
	e := r.env
	fmt.Fprintf(e.ErrOut, "Starting probes %s and %s (image %s)...\n", r.names[check.ProbeA], r.names[check.ProbeB], shortImage(r.ref.String()))
	labels := map[string]string{LabelCheckRun: r.id}
	for _, from := range []string{check.ProbeA, check.ProbeB} {
		name := r.names[from]
		p := &v1alpha1.Plugin{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace, Labels: labels},
			Spec:       v1alpha1.PluginSpec{Image: r.ref.String(), Manifest: apiconv.ManifestToAPI(r.m)},
		}
		if from == check.ProbeA {
			p.Spec.Config = atStartConfig
		}
		if err := r.c.Create(ctx, p, fieldOwner); err != nil {
			return writeError("creating probe plugin "+name, err)
		}
		a, err := plugins.Approve(name, r.m, nil, plugins.Selection{All: true})
		if err != nil {
			return exitf(ExitFailure, "approving probe %s: %w", name, err)
		}
		g := &v1alpha1.PluginGrant{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace, Labels: labels},
			Spec:       apiconv.GrantToAPI(a.Grant),
		}
		if err := r.c.Create(ctx, g, fieldOwner); err != nil {
			return writeError("creating probe grant "+name, err)
		}
	}
	return nil
}

// measure runs the cells in the probes' pods until none differs from what
// it expects or settle has passed: a new pod's policies reach the node's
// firewall within seconds, so a cell that differs is measured again, once
// a second.
func (r *isolationRun) measure(ctx context.Context, cells []check.Cell, pods map[string]*corev1.Pod, settle time.Duration) ([]check.Row, error) {
	observed := map[string]check.Observation{}
	deadline := time.Now().Add(settle)
	for {
		if err := r.measureOnce(ctx, cells, pods, observed); err != nil {
			return nil, err
		}
		rows := check.Measure(cells, observed)
		if len(check.Differing(rows)) == 0 || time.Now().After(deadline) {
			return rows, nil
		}
		select {
		case <-ctx.Done():
			return nil, exitf(ExitFailure, "interrupted while measuring: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// measureOnce runs, in both probes at once, each cell whose observation in
// observed does not yet match what it expects, and adds what they saw to
// observed. Each exec takes as long as its slowest cell.
func (r *isolationRun) measureOnce(ctx context.Context, cells []check.Cell, pods map[string]*corev1.Pod, observed map[string]check.Observation) error {
	var (
		wg   sync.WaitGroup
		got  = map[string]map[string]check.Observation{}
		errs = map[string]error{}
		mu   sync.Mutex
	)
	for _, from := range []string{check.ProbeA, check.ProbeB} {
		var todo []check.Cell
		for _, cell := range cells {
			if cell.From == from && !cell.Expect.Matches(observed[cell.Name].Observed) {
				todo = append(todo, cell)
			}
		}
		if len(todo) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := execProbe(ctx, r.cfg, r.cs, pods[from], todo)
			mu.Lock()
			defer mu.Unlock()
			got[from], errs[from] = o, err
		}()
	}
	wg.Wait()
	for _, from := range []string{check.ProbeA, check.ProbeB} {
		if errs[from] != nil {
			return errs[from]
		}
		maps.Copy(observed, got[from])
	}
	return nil
}

// newRunID is a short random id for one run's objects.
func newRunID() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// waitProbe waits until the operator runs the probe name and its rollout is
// complete: Ready is Running for the current generation and exactly one
// pod of it is Ready and not terminating. A reason that waiting cannot
// change (a refused signature, an invalid spec) ends the wait at once.
func (e *Env) waitProbe(ctx context.Context, c client.Client, name string) (*corev1.Pod, error) {
	last := "no status yet"
	for {
		var p v1alpha1.Plugin
		err := c.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, &p)
		if err == nil && p.Status.ObservedGeneration == p.Generation {
			for _, cond := range p.Status.Conditions {
				if cond.Type != v1alpha1.ConditionReady {
					continue
				}
				last = cond.Reason + ": " + cond.Message
				switch cond.Reason {
				case v1alpha1.ReasonSignatureNotVerified, v1alpha1.ReasonInvalidSpec, v1alpha1.ReasonInvalidConfig, v1alpha1.ReasonInvalidGrant, v1alpha1.ReasonNothingGranted:
					return nil, exitf(ExitFailure, "the operator will not run probe %s: %s", name, display.Message(last))
				case v1alpha1.ReasonProgressing:
					if msg, failed, err := gateFailure(ctx, c, e.Namespace, name); err != nil {
						return nil, err
					} else if failed {
						return nil, exitf(ExitFailure, "probe %s never started: its isolation gate found what a plugin must not reach still reachable (%s); plugins' NetworkPolicies are not enforced, so no plugin runs (docs/operator.md, the isolation gate)", // OF-42
							name, display.Limit(msg, 300))
					}
				case v1alpha1.ReasonRunning:
					pod, ok, err := readyPod(ctx, c, e.Namespace, name)
					if err != nil {
						return nil, err
					}
					if ok {
						return pod, nil
					}
					last = "Running, rollout not complete"
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, exitf(ExitFailure, "probe %s did not run in time; last seen %s", name, display.Message(last))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// gateFailure reports whether a pod of plugin name has an isolation gate
// (OF-42) that ended in failure, now or before a restart, with its
// termination message (the gate's last words; outside text to the CLI).
func gateFailure(ctx context.Context, c client.Client, ns, name string) (string, bool, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{plugins.LabelPluginName: name}); err != nil {
		return "", false, apiError("listing probe pods", err)
	}
	for _, pod := range pods.Items {
		for _, st := range pod.Status.InitContainerStatuses {
			if st.Name != plugins.GateContainerName {
				continue
			}
			for _, t := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
				if t != nil && t.ExitCode != 0 {
					return strings.TrimSpace(t.Message), true, nil
				}
			}
		}
	}
	return "", false, nil
}

// readyPod returns the plugin's pod when it has exactly one, Ready and not
// terminating.
func readyPod(ctx context.Context, c client.Client, ns, name string) (*corev1.Pod, bool, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{plugins.LabelPluginName: name}); err != nil {
		return nil, false, apiError("listing probe pods", err)
	}
	if len(pods.Items) != 1 {
		return nil, false, nil
	}
	pod := &pods.Items[0]
	if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
		return nil, false, nil
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			return pod, true, nil
		}
	}
	return nil, false, nil
}

// withProbes adds to t the addresses only the running probes give: A's
// node (its resolver) and both pods'.
func withProbes(t check.Targets, pods map[string]*corev1.Pod) check.Targets {
	a, b := pods[check.ProbeA], pods[check.ProbeB]
	t.NodeResolver = check.HostPort(a.Status.HostIP, 53)
	t.OtherProbe = check.HostPort(b.Status.PodIP, plugins.DefaultPluginPort)
	t.ProbeA = check.HostPort(a.Status.PodIP, plugins.DefaultPluginPort)
	return t
}

// isolationTargets reads the addresses the cells try that the cluster
// gives before any probe runs (withProbes adds the rest).
func (e *Env) isolationTargets(ctx context.Context, c client.Client, outside string) (check.Targets, error) {
	t := check.Targets{
		Outside:     outside,
		GrantedHost: probeGrantedHost,
		DeniedHost:  probeDeniedHost,
		DNSQuery:    probeDNSQuery,
	}

	var dns corev1.ServiceList
	if err := c.List(ctx, &dns, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"k8s-app": "kube-dns"}); err != nil {
		return t, apiError("finding the cluster DNS Service", err)
	}
	if len(dns.Items) == 0 || dns.Items[0].Spec.ClusterIP == "" {
		return t, exitf(ExitFailure, "no cluster DNS Service (a Service labelled k8s-app=kube-dns in kube-system)")
	}
	t.ClusterDNS = check.HostPort(dns.Items[0].Spec.ClusterIP, 53)

	var api corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, &api); err != nil {
		return t, apiError("reading the kubernetes Service", err)
	}
	if len(api.Spec.Ports) == 0 {
		return t, exitf(ExitFailure, "the kubernetes Service has no port")
	}
	t.APIServer = check.HostPort(api.Spec.ClusterIP, int(api.Spec.Ports[0].Port))

	var cores corev1.PodList
	if err := c.List(ctx, &cores, client.InNamespace(e.Namespace), client.MatchingLabels{plugins.LabelName: ownerapi.ServiceName}); err != nil {
		return t, apiError("finding the core's pod", err)
	}
	for _, pod := range cores.Items {
		if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || len(pod.Spec.Containers) == 0 {
			continue
		}
		for _, p := range pod.Spec.Containers[0].Ports {
			switch p.Name {
			case corePluginPortName:
				t.CorePlugin = check.HostPort(pod.Status.PodIP, int(p.ContainerPort))
			case ownerapi.ServicePort:
				t.CoreOwner = check.HostPort(pod.Status.PodIP, int(p.ContainerPort))
			}
		}
		break
	}
	if t.CorePlugin == "" || t.CoreOwner == "" {
		return t, exitf(ExitFailure, "no running openfief-core pod with the ports %q and %q in namespace %s", corePluginPortName, ownerapi.ServicePort, e.Namespace)
	}
	return t, nil
}

// corePluginPortName names the core container's plugin API port (deploy/core).
const corePluginPortName = "connect"

// probeExec runs command in the probe's pod through the API server, within
// timeout, and returns its bounded standard output; a failed exec (the
// command's non-zero exit among them) is an error with its bounded,
// escaped standard error.
func probeExec(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, pod *corev1.Pod, command []string, timeout time.Duration) (*bytes.Buffer, error) {
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: command, Stdout: true, Stderr: true}, clientgoscheme.ParameterCodec).URL()
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, err
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ectx, remotecommand.StreamOptions{Stdout: &limitedWriter{w: &stdout, n: maxProbeOutput}, Stderr: &limitedWriter{w: &stderr, n: 4 << 10}})
	if err != nil {
		return nil, exitf(ExitFailure, "running the probe in pod %s: %w (%s)", pod.Name, err, display.Message(stderr.String()))
	}
	return &stdout, nil
}

// execProbe runs the probe's cells in pod and returns what it observed.
// The probe's answer is bounded and parsed strictly; a cell it does not
// answer stays unmeasured.
func execProbe(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, pod *corev1.Pod, cells []check.Cell) (map[string]check.Observation, error) {
	// The probe takes short ASCII names: each cell goes by its index here.
	req := probewire.Request{TimeoutMillis: int(probeCellTimeout / time.Millisecond)}
	byID := map[string]string{}
	for i, c := range cells {
		id := fmt.Sprintf("cell-%02d", i)
		byID[id] = c.Name
		req.Cells = append(req.Cells, probewire.Cell{Name: id, Kind: c.Kind, Target: c.Target, Host: c.Host, Query: c.Query})
	}
	arg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	stdout, err := probeExec(ctx, cfg, cs, pod, []string{probewire.Binary, probewire.Run, string(arg)}, probeCellTimeout*3+10*time.Second)
	if err != nil {
		return nil, err
	}
	var resp probewire.Response
	dec := json.NewDecoder(stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		return nil, exitf(ExitFailure, "the probe in pod %s answered what is not its JSON: %w", pod.Name, err)
	}
	out := map[string]check.Observation{}
	for _, r := range resp.Results {
		if name, ok := byID[r.Name]; ok {
			out[name] = check.Observation{Observed: r.Observed, Detail: r.Detail}
		}
	}
	return out, nil
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
		l.n -= k
	}
	return len(p), nil
}

// removeProbes deletes the Plugins and PluginGrants of the check run run
// (every run's when run is empty: what interrupted runs left), then waits
// until their workloads are gone. Only objects labelled LabelCheckRun are
// ever touched.
func (e *Env) removeProbes(ctx context.Context, c client.Client, run string) error {
	sel := client.HasLabels{LabelCheckRun}
	var match client.ListOption = sel
	if run != "" {
		match = client.MatchingLabels{LabelCheckRun: run}
	}
	var ps v1alpha1.PluginList
	if err := c.List(ctx, &ps, client.InNamespace(e.Namespace), match); err != nil {
		return apiError("listing probe plugins", err)
	}
	var gs v1alpha1.PluginGrantList
	if err := c.List(ctx, &gs, client.InNamespace(e.Namespace), match); err != nil {
		return apiError("listing probe grants", err)
	}
	if run == "" && len(ps.Items)+len(gs.Items) > 0 {
		fmt.Fprintf(e.ErrOut, "Removing %d probe plugins and %d grants an interrupted check left...\n", len(ps.Items), len(gs.Items))
	}
	var names []string
	for i := range ps.Items {
		names = append(names, ps.Items[i].Name)
		if err := deleteObject(ctx, c, &ps.Items[i]); err != nil {
			return apiError("deleting probe plugin "+ps.Items[i].Name, err)
		}
	}
	for i := range gs.Items {
		if err := deleteObject(ctx, c, &gs.Items[i]); err != nil {
			return apiError("deleting probe grant "+gs.Items[i].Name, err)
		}
	}
	for _, name := range names {
		if err := waitWorkloadGone(ctx, e, e.ErrOut, c, name, cleanupTimeout); err != nil {
			return err
		}
		if err := waitPodsGone(ctx, c, e.Namespace, name); err != nil {
			return err
		}
	}
	return nil
}

// waitPodsGone waits until the plugin name has no pod left, terminating
// or not.
func waitPodsGone(ctx context.Context, c client.Client, ns, name string) error {
	for {
		var pods corev1.PodList
		err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{plugins.LabelPluginName: name})
		if err == nil && len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return exitf(ExitFailure, "the pods of probe %s were still there when the cleanup's time ran out; remove them with: kubectl -n %s delete pod -l %s=%s", name, ns, plugins.LabelPluginName, name)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runIsolation is `openfief check --isolation`'s part after the other
// checks: it measures and decides, printing progress on ErrOut.
func (e *Env) runIsolation(ctx context.Context, o isolationOptions) ([]check.Row, []check.Result, error) {
	start := time.Now()
	rows, err := e.isolation(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(e.ErrOut, "Isolation measured in %s.\n", time.Since(start).Round(100*time.Millisecond))
	return rows, check.Isolation(rows), nil
}
