package operator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// rootFixture is a TUF repository with a start root (its version 1 and a
// virtual Sigstore's trusted root) and a trustRoots over it that counts its
// rebuilds.
type rootFixture struct {
	repo     *cosigntest.TUFRepo
	later    []byte // a second virtual Sigstore's trusted_root.json
	roots    *trustRoots
	rec      *events.FakeRecorder
	rebuilds int
	failNext error
}

func newRootFixture(t *testing.T) *rootFixture {
	t.Helper()
	f := &rootFixture{repo: cosigntest.NewTUFRepo(t), rec: events.NewFakeRecorder(10)}
	first := cosigntest.NewKeyless(t, "https://issuer.example", "someone@example.com")
	start, err := cosign.NewStartTrustRoot(f.repo.Root(1), cosigntest.TrustedRootJSON(t, first.VS))
	if err != nil {
		t.Fatal(err)
	}
	f.later = cosigntest.TrustedRootJSON(t, cosigntest.NewKeyless(t, "https://issuer.example", "someone@example.com").VS)
	f.roots = &trustRoots{start: start, recorder: f.rec, log: logr.Discard(), now: time.Now, changed: make(chan event.GenericEvent, 1)}
	f.roots.inUse.Store(&start)
	f.roots.rebuild = func() error {
		f.rebuilds++
		err := f.failNext
		f.failNext = nil
		return err
	}
	return f
}

func rootConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: plugins.TrustRootConfigMap, Namespace: plugins.Namespace}, Data: data}
}

// events drains the Events recorded so far.
func (f *rootFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestTrustRootsApply: the admin's files that verify replace the root and
// rebuild the checker once, with a Normal Event; the same content again
// changes nothing; content that does not verify is refused with one
// Warning Event naming the file, the root in use stays and the status says
// both; a rebuild that fails is a refusal too; no ConfigMap is the start
// again.
func TestTrustRootsApply(t *testing.T) {
	f := newRootFixture(t)
	start := f.roots.status()
	if start.Source != plugins.TrustRootEmbedded || start.Refused != nil {
		t.Fatalf("status at start = %+v", start)
	}
	f.repo.RotateRoot(t)
	good := f.repo.Publish(t, f.later)

	if !f.roots.take(rootConfigMap(good)) || f.rebuilds != 1 {
		t.Fatalf("the rotated root: changed=false or %d rebuilds, want applied with 1", f.rebuilds)
	}
	applied := f.roots.status()
	if applied.Source != plugins.TrustRootFromConfigMap || applied.ConfigMap != plugins.TrustRootFingerprint(good) || applied.RootVersion != 2 {
		t.Errorf("status after the update = %+v", applied)
	}
	if f.roots.material() == nil {
		t.Fatal("no material in use")
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+EventTrustRootApplied) || !strings.Contains(ev[0], applied.SHA256) {
		t.Errorf("Events = %q, want one %s naming the digest", ev, EventTrustRootApplied)
	}
	if f.roots.take(rootConfigMap(good)) || f.rebuilds != 1 {
		t.Error("the same content again changed the root")
	}

	// Signed by a repository whose root was never trusted.
	stranger := cosigntest.NewTUFRepo(t)
	stranger.RotateRoot(t)
	stranger.RotateRoot(t)
	bad := stranger.Publish(t, f.later)
	for range 2 {
		if f.roots.take(rootConfigMap(bad)) {
			t.Fatal("a root from another repository was applied")
		}
	}
	got := f.roots.status()
	if got.SHA256 != applied.SHA256 || got.ConfigMap != applied.ConfigMap || f.rebuilds != 1 {
		t.Errorf("the root in use changed on a refusal: %+v", got)
	}
	if got.Refused == nil || got.Refused.ConfigMap != plugins.TrustRootFingerprint(bad) || !strings.Contains(got.Refused.Reason, "3.root.json") {
		t.Errorf("Refused = %+v, want the refused content naming 3.root.json", got.Refused)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+EventTrustRootInvalid) || !strings.Contains(ev[0], "3.root.json") {
		t.Errorf("Events = %q, want one %s naming the file", ev, EventTrustRootInvalid)
	}
	if _, err := plugins.EncodeTrustRootStatus(got); err != nil {
		t.Errorf("the status does not encode: %v", err)
	}

	// The next publication verifies, but the checker cannot be built.
	next := f.repo.Publish(t, f.later)
	f.failNext = errors.New("no verifier")
	if f.roots.take(rootConfigMap(next)) {
		t.Error("a root the checker refused was applied")
	}
	if got := f.roots.status(); got.SHA256 != applied.SHA256 || got.Refused == nil || !strings.Contains(got.Refused.Reason, "no verifier") {
		t.Errorf("status after a failed rebuild = %+v", got)
	}
	f.events()

	// The ConfigMap deleted: the start again, and the refusal forgotten.
	if !f.roots.take(nil) {
		t.Error("deleting the ConfigMap changed nothing")
	}
	if got := f.roots.status(); got != start {
		t.Errorf("status without the ConfigMap = %+v, want %+v", got, start)
	}
	if len(f.roots.changed) != 1 {
		t.Error("the status publisher was not woken")
	}
}

// TestTrustRootsRefusalOneLine: a ConfigMap that breaks several rules is
// refused with every problem on one line, safe to show.
func TestTrustRootsRefusalOneLine(t *testing.T) {
	f := newRootFixture(t)
	if f.roots.take(rootConfigMap(map[string]string{"root.json": "x", "07.root.json": "y"})) {
		t.Fatal("an invalid ConfigMap was applied")
	}
	got := f.roots.status().Refused
	if got == nil || strings.Contains(got.Reason, "\n") || plugins.CheckText(got.Reason, plugins.MaxTrustRootReason) != nil ||
		!strings.Contains(got.Reason, "07.root.json") || !strings.Contains(got.Reason, "; ") {
		t.Errorf("Refused = %+v, want every problem on one safe line", got)
	}
}

// TestTrustRootPublisher: the status ConfigMap holds the root in use and
// the refusal, written once per change.
func TestTrustRootPublisher(t *testing.T) {
	f := newRootFixture(t)
	cl := fake.NewClientBuilder().Build()
	p := &trustRootPublisher{client: cl, roots: f.roots}
	ctx := context.Background()
	read := func() plugins.TrustRootStatus {
		t.Helper()
		var cm corev1.ConfigMap
		if err := cl.Get(ctx, trustRootStatusKey, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels[plugins.LabelManagedBy] != plugins.ValueManagedBy {
			t.Errorf("labels %v", cm.Labels)
		}
		s, err := plugins.ParseTrustRootStatus([]byte(cm.Data[plugins.TrustRootStatusKey]))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := p.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != f.roots.status() {
		t.Errorf("published %+v, want %+v", got, f.roots.status())
	}
	stranger := cosigntest.NewTUFRepo(t)
	stranger.RotateRoot(t)
	f.roots.take(rootConfigMap(stranger.Publish(t, f.later)))
	if err := p.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Refused == nil || got.Source != plugins.TrustRootEmbedded {
		t.Errorf("published %+v, want the refusal beside the start", got)
	}
}
