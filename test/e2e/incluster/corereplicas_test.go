//go:build cluster

package incluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/core/store/pgtest"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// The core's replicas in this phase: their lease settings (short, so the
// phase sees instances move in seconds) and the countsync connector's call
// time (testdata/countsync).
const (
	replicaCount    = 3
	replicaLeaseTTL = 9 * time.Second
	replicaRenew    = 3 * time.Second
	countSyncTime   = 3 * time.Second
	// replicaBound is the longest an instance may go without a call
	// after its replica was killed or cut off: the lease's expiry, a
	// renewal round of the replica taking it, the sync interval and a
	// call's time, plus slack for a loaded two-core machine.
	replicaBound = replicaLeaseTTL + 2*replicaRenew + testSyncInterval + countSyncTime + 5*time.Second
)

// countInstances are the connectors the phase runs on the replicas.
var countInstances = []string{"count-a", "count-b"}

// testCoreReplicas runs openfief-core as three replicas on a real
// PostgreSQL (Debian's, on the node's bridge) with the postgres-replicas
// component, installed by `openfief platform upgrade`, and two countsync
// connectors, which log every call with the caller's address and the calls
// in flight. It then
//   - kills (SIGKILL) the replica serving count-a in the middle of a
//     sync: another replica calls count-a within replicaBound, and the
//     killed call's delivery is never stored;
//   - freezes (SIGSTOP) the replica serving count-a next in the middle of
//     a sync, its connection to the connector open: a replica of another
//     pod calls count-a within replicaBound; the frozen one is continued
//     afterwards and stores nothing of the call it was making (its fence);
//   - cuts the replica serving count-b off from the API server (its pod's
//     network namespace drops the API server's addresses): count-b moves to
//     another replica within replicaBound, and nothing the cut replica
//     called after its lease was gone is stored;
//
// and checks over every call of both connectors that none was called by
// two replicas at once (the connector's count of calls in flight) and no
// gap between calls exceeds the interval plus replicaBound. The platform
// goes back to one replica on SQLite when the phase ends, passed or failed.
func testCoreReplicas(t *testing.T, e *platformEnv) {
	ctx := context.Background()
	db := startReplicaDatabase(t, e)
	overlay := replicasOverlay(t, e, db)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "openfief-core-database", Namespace: plugins.Namespace},
		StringData: map[string]string{"dsn": db.podDSN, "password": db.password},
	}
	_, err := e.cs.CoreV1().Secrets(plugins.Namespace).Create(ctx, secret, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		uninstallPlugins(t, e, countInstances)
		start := time.Now()
		code, out := e.cli(context.Background(), "platform", "upgrade", "--overlay", e.overlay, "--timeout", "4m")
		t.Logf("back to one replica on SQLite: openfief platform upgrade --overlay %s: exit %d in %s\n%s", e.overlay, code, time.Since(start).Round(100*time.Millisecond), out)
		if code != 0 {
			t.Errorf("going back to one replica on SQLite exited %d", code)
		}
		waitCoreReplicas(t, e, 1)
		_ = e.cs.CoreV1().Secrets(plugins.Namespace).Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	})

	start := time.Now()
	out := openfief(t, e.kubeconfig, "platform", "upgrade", "--overlay", overlay, "--timeout", "4m")
	if !strings.Contains(out, fmt.Sprintf("%d replica(s) on PostgreSQL", replicaCount)) {
		t.Errorf("platform upgrade does not say the core runs %d replicas on PostgreSQL:\n%s", replicaCount, out)
	}
	waitCoreReplicas(t, e, replicaCount)
	t.Logf("the core runs %d replicas on PostgreSQL %s after the upgrade began", replicaCount, time.Since(start).Round(100*time.Millisecond))

	ref := e.preg.publish(t, "plugins/countsync", plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}},
		map[string][]byte{"plugin": buildStatic(t, e.root, "./test/e2e/incluster/testdata/countsync")}, e.signer)
	logs := map[string]*callLog{}
	for _, name := range countInstances {
		openfief(t, e.kubeconfig, "plugin", "install", name, "--image", ref.String(), "--signers", e.signersFile, "--insecure-registry", e.preg.bridge)
		openfief(t, e.kubeconfig, "plugin", "approve", name, "--yes")
	}
	for _, name := range countInstances {
		logs[name] = followCalls(t, e, runningPluginPod(t, e.cs, name))
	}
	for _, name := range countInstances {
		logs[name].waitCalls(t, 2, 2*time.Minute)
	}

	killed := stopMidSync(t, e, db, logs["count-a"], "count-a", syscall.SIGKILL)
	frozen := stopMidSync(t, e, db, logs["count-a"], "count-a", syscall.SIGSTOP)
	cut := cutFromAPIServer(t, e, db, logs, "count-b")

	// A few more rounds after both moves before the calls are judged.
	for _, name := range countInstances {
		logs[name].waitCallsAfter(t, time.Now(), 2, 2*time.Minute)
	}
	for _, name := range countInstances {
		checkCalls(t, name, logs[name].snapshot())
	}
	checkNotStored(t, db, "count-a", logs["count-a"].snapshot(), func(c call) bool { return c.seq == killed || c.seq == frozen },
		"calls of the killed and the frozen replica")
	checkNotStored(t, db, "count-b", logs["count-b"].snapshot(), func(c call) bool {
		return c.peer == cut.ip && c.end.After(cut.moved)
	}, "calls of the cut replica ending after its lease was gone")
}

// replicaDatabase is the phase's PostgreSQL: pgtest's server with a role
// that needs its password, reached by the pods through a forwarder on the
// node's bridge address.
type replicaDatabase struct {
	pg       *pgtest.Server
	name     string // the database
	podDSN   string // the DSN the core's pods use, without the password
	password string
	bridge   *net.TCPAddr
}

// startReplicaDatabase starts PostgreSQL (Debian's postgresql package, which
// make test-deps installs) and a forwarder from a port of the node's
// bridge to it: the server itself listens on loopback only.
func startReplicaDatabase(t *testing.T, e *platformEnv) *replicaDatabase {
	t.Helper()
	ctx := context.Background()
	pg, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatalf("the core's replicas need PostgreSQL here: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	db := &replicaDatabase{pg: pg, password: "replicas-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	dsn, err := pg.PasswordRole(ctx, "openfief_core", db.password)
	must(t, err)
	u, err := url.Parse(dsn)
	must(t, err)
	db.name = strings.TrimPrefix(u.Path, "/")
	l, err := net.Listen("tcp", net.JoinHostPort(e.c.NodeGateway().String(), "0"))
	must(t, err)
	db.bridge = l.Addr().(*net.TCPAddr)
	go forward(l, u.Host)
	t.Cleanup(func() { _ = l.Close() })
	u.Host = db.bridge.String()
	db.podDSN = u.String()
	return db
}

// forward passes every connection l accepts to target until l is closed.
func forward(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			d, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				return
			}
			defer func() { _ = d.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(d, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, d); done <- struct{}{} }()
			<-done
		}()
	}
}

// query runs one query as the server's superuser on the phase's database.
func (db *replicaDatabase) query(t *testing.T, q string, args []any, scan func(pgx.Rows) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.pg.DSN(db.name))
	must(t, err)
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, q, args...)
	must(t, err)
	defer rows.Close()
	for rows.Next() {
		must(t, scan(rows))
	}
	must(t, rows.Err())
}

// leaseLive is the leases table's condition for a lease not yet expired,
// by the database's clock, as the core reads it.
const leaseLive = `expires_ms > (extract(epoch from clock_timestamp()) * 1000)::bigint`

// lease is one row of the core's leases table.
type lease struct {
	owner, address string
	epoch          int64
	live           bool
}

// holder reads who holds instance's lease now.
func (db *replicaDatabase) holder(t *testing.T, instance string) (lease, bool) {
	t.Helper()
	var l lease
	found := false
	db.query(t, `SELECT owner, address, epoch, `+leaseLive+` FROM leases WHERE instance = $1`,
		[]any{instance}, func(r pgx.Rows) error {
			found = true
			return r.Scan(&l.owner, &l.address, &l.epoch, &l.live)
		})
	return l, found && l.live
}

// replicasOverlay writes an overlay over the installed one that runs the
// core as replicaCount replicas on db (deploy/core/components/postgres-replicas),
// with the core's egress to db's forwarder allowed and short leases.
func replicasOverlay(t *testing.T, e *platformEnv, db *replicaDatabase) string {
	t.Helper()
	dir := filepath.Join(e.work, "core-replicas")
	must(t, os.MkdirAll(dir, 0o755))
	base, err := filepath.Rel(dir, e.overlay)
	must(t, err)
	component, err := filepath.Rel(dir, filepath.Join(e.root, "deploy", "core", "components", "postgres-replicas"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(`resources:
  - %s
components:
  - %s
patches:
  - target: {kind: Deployment, name: %s}
    patch: |-
      - {op: replace, path: /spec/replicas, value: %d}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--lease-duration=%s"}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--lease-renew=%s"}
  - target: {group: networking.k8s.io, kind: NetworkPolicy, name: openfief-core}
    patch: |-
      - op: add
        path: /spec/egress/-
        value:
          to: [{ipBlock: {cidr: %s/32}}]
          ports: [{protocol: TCP, port: %d}]
`, base, component, deploy.CoreDeployment, replicaCount, replicaLeaseTTL, replicaRenew, db.bridge.IP, db.bridge.Port)), 0o644))
	return dir
}

// waitCoreReplicas waits until the core's Deployment has n replicas, every
// one updated and Available, and no other pod of the core is left.
func waitCoreReplicas(t *testing.T, e *platformEnv, n int32) {
	t.Helper()
	testutil.Eventually(t, 4*time.Minute, fmt.Sprintf("%d replicas of the core Available", n), func() (bool, string) {
		d, err := e.cs.AppsV1().Deployments(plugins.Namespace).Get(context.Background(), deploy.CoreDeployment, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods := listPods(t, e, "app.kubernetes.io/name="+deploy.CoreDeployment)
		s := d.Status
		return *d.Spec.Replicas == n && platform.DeploymentAvailable(d) && s.UpdatedReplicas == n && s.AvailableReplicas == n &&
				s.Replicas == n && len(pods) == int(n),
			fmt.Sprintf("spec %d, %d updated, %d available, %d pods", *d.Spec.Replicas, s.UpdatedReplicas, s.AvailableReplicas, len(pods))
	})
}

// call is one Sync of a countsync connector, from its two log lines.
type call struct {
	seq        int
	inFlight   int
	peer       string // the caller's IP
	watermark  string
	start, end time.Time
	result     string // "ok", or why it ended early; "" while in flight
}

// callLine is countsync's log line (testdata/countsync's Line).
type callLine struct {
	Event     string `json:"event"`
	Seq       int    `json:"seq"`
	InFlight  int    `json:"inFlight"`
	Peer      string `json:"peer"`
	Watermark string `json:"watermark"`
	At        string `json:"at"`
	Result    string `json:"result"`
}

// callLog is a countsync connector's calls as its log tells them.
type callLog struct {
	mu    sync.Mutex
	calls []call
	bad   []string
}

// followCalls follows the log of the connector's pod until the test ends.
func followCalls(t *testing.T, e *platformEnv, pod *corev1.Pod) *callLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := e.cs.CoreV1().Pods(plugins.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	must(t, err)
	l := &callLog{}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer func() { _ = stream.Close() }()
		sc := bufio.NewScanner(stream)
		sc.Buffer(make([]byte, 4096), 4096)
		for sc.Scan() {
			l.add(sc.Text())
		}
	}()
	return l
}

func (l *callLog) add(text string) {
	var line callLine
	if !strings.HasPrefix(text, "{") {
		return // the SDK's own lines
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := json.Unmarshal([]byte(text), &line); err != nil {
		l.bad = append(l.bad, text)
		return
	}
	at, err := time.Parse(time.RFC3339Nano, line.At)
	if err != nil {
		l.bad = append(l.bad, text)
		return
	}
	peer, _, _ := net.SplitHostPort(line.Peer)
	switch line.Event {
	case "start":
		l.calls = append(l.calls, call{seq: line.Seq, inFlight: line.InFlight, peer: peer, watermark: line.Watermark, start: at})
	case "end":
		for i := range l.calls {
			if l.calls[i].seq == line.Seq {
				l.calls[i].end, l.calls[i].result = at, line.Result
			}
		}
	default:
		l.bad = append(l.bad, text)
	}
}

func (l *callLog) snapshot() []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// waitCalls waits until n calls have ended.
func (l *callLog) waitCalls(t *testing.T, n int, within time.Duration) {
	t.Helper()
	l.waitCallsAfter(t, time.Time{}, n, within)
}

// waitCallsAfter waits until n calls started after since have ended.
func (l *callLog) waitCallsAfter(t *testing.T, since time.Time, n int, within time.Duration) {
	t.Helper()
	testutil.Eventually(t, within, fmt.Sprintf("%d calls after %s", n, since.Format(time.TimeOnly)), func() (bool, string) {
		got := 0
		for _, c := range l.snapshot() {
			if c.start.After(since) && c.result != "" {
				got++
			}
		}
		return got >= n, fmt.Sprintf("%d", got)
	})
}

// stopMidSync waits until the replica holding instance's lease is in the
// middle of a call (at least half of it left) and sends its core process
// sig: SIGKILL, a crash (the kubelet starts the container again), or
// SIGSTOP, a replica frozen with its connections open, as a hung node or a
// long pause would leave it. It then waits until a replica other than the
// stopped process calls instance, another pod when the process is frozen.
// A frozen process is continued (SIGCONT) once the call was made, and the
// phase waits two renewal periods for whatever it would store, which its
// fence must refuse. It returns the sequence number of the call it cut.
func stopMidSync(t *testing.T, e *platformEnv, db *replicaDatabase, log *callLog, instance string, sig syscall.Signal) int {
	t.Helper()
	var victim call
	var holder lease
	testutil.Eventually(t, time.Minute, instance+" in the middle of a call", func() (bool, string) {
		calls := log.snapshot()
		if len(calls) == 0 {
			return false, "no call"
		}
		last := calls[len(calls)-1]
		if last.result != "" || time.Since(last.start) > countSyncTime/2 {
			return false, "between calls"
		}
		h, ok := db.holder(t, instance)
		if !ok || hostOf(h.address) != last.peer {
			return false, fmt.Sprintf("held by %+v, called from %s", h, last.peer)
		}
		victim, holder = last, h
		return true, ""
	})
	pod := podWithIP(t, e, victim.peer)
	pid := coreProcess(t, e, pod)
	at := time.Now()
	must(t, syscall.Kill(pid, sig))
	frozen := sig == syscall.SIGSTOP
	if frozen {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	}
	t.Logf("%s: replica %s (pod %s, process %d) %s into its call %d of %s", unix.SignalName(sig), holder.owner, pod.Name, pid,
		at.Sub(victim.start).Round(time.Millisecond), victim.seq, instance)

	var next call
	testutil.Eventually(t, replicaBound+30*time.Second, "another replica calling "+instance, func() (bool, string) {
		for _, c := range log.snapshot() {
			if c.start.After(at) {
				next = c
				return true, ""
			}
		}
		return false, "no call since the signal"
	})
	h, _ := db.holder(t, instance)
	if h.owner == holder.owner {
		t.Errorf("%s is still held by the stopped replica %s", instance, holder.owner)
	}
	if frozen && next.peer == victim.peer {
		t.Errorf("%s was called from the frozen replica's address %s", instance, next.peer)
	}
	took := next.start.Sub(at)
	t.Logf("replica %s (%s) called %s %s after the %s (bound %s)", h.owner, next.peer, instance, took.Round(time.Millisecond), unix.SignalName(sig), replicaBound)
	if took > replicaBound {
		t.Errorf("%s waited %s for another replica after its replica got %s, over the bound %s", instance, took, unix.SignalName(sig), replicaBound)
	}
	if frozen {
		cont := metav1.Now()
		must(t, syscall.Kill(pid, syscall.SIGCONT))
		time.Sleep(2 * replicaRenew)
		t.Logf("continued the frozen replica %s %s after it was stopped; what it logged since:", holder.owner, time.Since(at).Round(time.Millisecond))
		if b, err := e.cs.CoreV1().Pods(plugins.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{SinceTime: &cont}).DoRaw(context.Background()); err == nil {
			t.Logf("%s", b)
		}
	} else {
		for _, c := range log.snapshot() {
			if c.seq == victim.seq && (c.result == "ok" || c.result == "") {
				t.Errorf("the call %d cut by the kill ended %q, want it cancelled", c.seq, c.result)
			}
		}
	}
	return victim.seq
}

// cut is the replica cutFromAPIServer cut off.
type cut struct {
	ip    string
	moved time.Time // when its lease of the instance was first seen gone
}

// cutFromAPIServer drops the API server's packets in the network namespace
// of the replica holding instance, waits until the instance is held by
// another replica and called by it, checks that the cut replica holds no
// lease and calls nothing for a while, and heals the cut.
func cutFromAPIServer(t *testing.T, e *platformEnv, db *replicaDatabase, logs map[string]*callLog, instance string) cut {
	t.Helper()
	ctx := context.Background()
	var holder lease
	testutil.Eventually(t, time.Minute, instance+" held", func() (bool, string) {
		var ok bool
		holder, ok = db.holder(t, instance)
		return ok, fmt.Sprintf("%+v", holder)
	})
	pod := podWithIP(t, e, hostOf(holder.address))
	netns, err := e.c.PodNetNS(string(pod.UID))
	must(t, err)
	// The API server's Service and its endpoints, by address and port: the
	// endpoint is the node's bridge address here, where the database's
	// forwarder listens too, which must stay reachable.
	var rules [][]string
	drop := func(ip string, port int32) {
		rules = append(rules, []string{"-d", ip, "-p", "tcp", "--dport", strconv.Itoa(int(port)), "-j", "DROP"})
	}
	svc, err := e.cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	must(t, err)
	for _, p := range svc.Spec.Ports {
		drop(svc.Spec.ClusterIP, p.Port)
	}
	eps, err := e.cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	must(t, err)
	for _, s := range eps.Items {
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				for _, p := range s.Ports {
					if p.Port != nil {
						drop(a, *p.Port)
					}
				}
			}
		}
	}
	if len(rules) < 2 {
		t.Fatalf("the API server's addresses: %v", rules)
	}
	iptables := func(op string, rule []string) error {
		args := append([]string{"--net=" + netns, "iptables", op, "OUTPUT"}, rule...)
		if out, err := exec.Command("nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("nsenter %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	healed := false
	heal := func() {
		if healed {
			return
		}
		healed = true
		for _, r := range rules {
			if err := iptables("-D", r); err != nil {
				t.Errorf("healing the cut: %v", err)
			}
		}
	}
	for _, r := range rules {
		must(t, iptables("-I", r))
	}
	t.Cleanup(heal)
	at := time.Now()
	t.Logf("cut replica %s (pod %s) off from the API server: %v", holder.owner, pod.Name, rules)

	c := cut{ip: hostOf(holder.address)}
	testutil.Eventually(t, replicaBound+30*time.Second, instance+" held by another replica", func() (bool, string) {
		h, ok := db.holder(t, instance)
		if ok && h.owner != holder.owner {
			c.moved = time.Now()
			return true, ""
		}
		return false, fmt.Sprintf("%+v", h)
	})
	logs[instance].waitCallsAfter(t, c.moved, 1, replicaBound+30*time.Second)
	var next call
	for _, x := range logs[instance].snapshot() {
		if x.start.After(c.moved) {
			next = x
			break
		}
	}
	t.Logf("%s moved %s after the cut, and was called by %s %s after the cut (bound %s)", instance,
		c.moved.Sub(at).Round(time.Millisecond), next.peer, next.start.Sub(at).Round(time.Millisecond), replicaBound)
	if took := next.start.Sub(at); took > replicaBound {
		t.Errorf("%s waited %s for another replica after its replica was cut off, over the bound %s", instance, took, replicaBound)
	}

	// While cut, the replica holds nothing and calls nothing.
	time.Sleep(2 * replicaRenew)
	var held []string
	db.query(t, `SELECT instance FROM leases WHERE owner = $1 AND `+leaseLive,
		[]any{holder.owner}, func(r pgx.Rows) error {
			var s string
			err := r.Scan(&s)
			held = append(held, s)
			return err
		})
	if len(held) > 0 {
		t.Errorf("the cut replica %s still holds %v", holder.owner, held)
	}
	for name, l := range logs {
		for _, x := range l.snapshot() {
			if x.peer == c.ip && x.start.After(c.moved) {
				t.Errorf("the cut replica %s called %s (call %d) at %s, after its lease was gone", holder.owner, name, x.seq, x.start.Format(time.StampMilli))
			}
		}
	}
	heal()
	t.Logf("healed the cut %s after it began", time.Since(at).Round(time.Millisecond))
	return c
}

// checkCalls fails when a call of instance found another in flight, or a
// gap between two calls' starts exceeds the interval plus replicaBound.
func checkCalls(t *testing.T, instance string, calls []call) {
	t.Helper()
	most, longest := 0, time.Duration(0)
	peers := map[string]int{}
	for i, c := range calls {
		most = max(most, c.inFlight)
		peers[c.peer]++
		if c.inFlight != 1 {
			t.Errorf("%s: call %d from %s found %d calls in flight: two replicas called it at once", instance, c.seq, c.peer, c.inFlight)
		}
		if i > 0 {
			gap := c.start.Sub(calls[i-1].start)
			longest = max(longest, gap)
			if gap > testSyncInterval+replicaBound {
				t.Errorf("%s: %s between call %d and call %d, over the interval and the bound (%s)", instance, gap, calls[i-1].seq, c.seq, testSyncInterval+replicaBound)
			}
		}
	}
	t.Logf("%s: %d calls from %d replicas' addresses %v, at most %d in flight, longest gap between starts %s",
		instance, len(calls), len(peers), peers, most, longest.Round(time.Millisecond))
}

// checkNotStored fails when a delivery of a call of instance that excluded
// selects was stored: countsync dates its one FX rate by the call's
// sequence number.
func checkNotStored(t *testing.T, db *replicaDatabase, instance string, calls []call, excluded func(call) bool, what string) {
	t.Helper()
	stored := map[string]bool{}
	db.query(t, `SELECT date FROM fx_rates WHERE instance = $1`, []any{instance}, func(r pgx.Rows) error {
		var d string
		err := r.Scan(&d)
		stored[d] = true
		return err
	})
	day0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	n, ok := 0, 0
	for _, c := range calls {
		if c.result == "ok" && stored[day0.AddDate(0, 0, c.seq).Format(time.DateOnly)] {
			ok++
		}
		if !excluded(c) {
			continue
		}
		n++
		if stored[day0.AddDate(0, 0, c.seq).Format(time.DateOnly)] {
			t.Errorf("%s: the delivery of call %d from %s (%s) was stored", instance, c.seq, c.peer, what)
		}
	}
	t.Logf("%s: %d deliveries stored of %d calls; none of the %d %s", instance, ok, len(calls), n, what)
	if ok == 0 {
		t.Errorf("%s: nothing stored", instance)
	}
}

// podWithIP returns the core's pod with the IP.
func podWithIP(t *testing.T, e *platformEnv, ip string) corev1.Pod {
	t.Helper()
	for _, p := range listPods(t, e, "app.kubernetes.io/name="+deploy.CoreDeployment) {
		if p.Status.PodIP == ip && p.DeletionTimestamp == nil {
			return p
		}
	}
	t.Fatalf("no pod of the core has IP %s", ip)
	return corev1.Pod{}
}

// coreProcess returns the PID of the core's process in pod.
func coreProcess(t *testing.T, e *platformEnv, pod corev1.Pod) int {
	t.Helper()
	pids, err := e.c.PodPIDs(string(pod.UID))
	must(t, err)
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), "--owner-listen") {
			return pid
		}
	}
	t.Fatalf("no core process among pod %s's %v", pod.Name, pids)
	return 0
}

// hostOf is the host of a HOST:PORT address.
func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}
