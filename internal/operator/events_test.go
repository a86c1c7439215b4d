package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// statusWrapper builds a PluginStatus for the pluginEvents table.
type statusWrapper struct{ v1alpha1.PluginStatus }

// status starts a status that observed generation gen.
func status(gen int64) *statusWrapper {
	return &statusWrapper{v1alpha1.PluginStatus{ObservedGeneration: gen}}
}

func (w *statusWrapper) cond(typ string, st metav1.ConditionStatus, reason, msg string) *statusWrapper {
	w.Conditions = append(w.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: w.ObservedGeneration})
	return w
}

func (w *statusWrapper) sig(st metav1.ConditionStatus, reason, msg string) *statusWrapper {
	return w.cond(v1alpha1.ConditionSignatureVerified, st, reason, msg)
}

func (w *statusWrapper) signed() *statusWrapper {
	return w.sig(metav1.ConditionTrue, v1alpha1.ReasonSignedByTrustedSigner, "signed by trusted signer ci")
}

func (w *statusWrapper) ready(reason, msg string) *statusWrapper {
	st := metav1.ConditionFalse
	if reason == v1alpha1.ReasonRunning || reason == v1alpha1.ReasonRunningPreviousVersion {
		st = metav1.ConditionTrue
	}
	return w.cond(v1alpha1.ConditionReady, st, reason, msg)
}

func (w *statusWrapper) deployed(d *v1alpha1.DeployedVersion) *statusWrapper {
	w.Deployed = d
	return w
}

func (w *statusWrapper) pending(egress ...string) *statusWrapper {
	w.PendingApproval = &v1alpha1.PendingApproval{Egress: egress}
	return w
}

// history sets status.history to revisions of the given records, the
// first the newest, numbered down from len(records).
func (w *statusWrapper) history(records ...*v1alpha1.DeployedVersion) *statusWrapper {
	w.History = nil
	for i, d := range records {
		w.History = append(w.History, v1alpha1.PluginRevision{Revision: int64(len(records) - i), Image: d.Image, FirstRan: *d.VerifiedAt})
	}
	return w
}

func (w *statusWrapper) obj() *v1alpha1.PluginStatus { return w.DeepCopy() }

// record is a verified-version record of image word, verified at second s.
func record(word string, s int64) *v1alpha1.DeployedVersion {
	return &v1alpha1.DeployedVersion{
		Image: "registry.example.com/p@" + testutil.Digest(word), Signer: "ci", Trust: v1alpha1.ReasonSignedByTrustedSigner,
		VerifiedAt: &metav1.Time{Time: time.Unix(s, 0)},
	}
}

func TestPluginEvents(t *testing.T) {
	v1, v2 := record("v1", 100), record("v2", 200)
	waiting := &keptPrevious{why: "the current spec waits for approval of egress: static.nbp.pl:443", waitsForApproval: true}
	refused := &keptPrevious{why: "the current spec cannot run: no signature"}
	running := func(gen int64, d *v1alpha1.DeployedVersion) *statusWrapper {
		return status(gen).signed().ready(v1alpha1.ReasonRunning, "running "+d.Image).deployed(d)
	}
	tests := map[string]struct {
		prev, next  *v1alpha1.PluginStatus
		kept        *keptPrevious
		applyFailed bool
		want        []string // "Type Reason: note"
	}{
		"first install verifies and rolls out": {
			prev: status(0).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal RolledOut: rolled out " + v1.Image + " (SignedByTrustedSigner, signer ci)",
			},
		},
		"a rollback to an older revision's image": {
			prev: running(3, v2).history(v2, v1).obj(),
			next: running(4, v1).history(v1, v2, v1).obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal RolledBack: rolled back to the image of revision 1, " + v1.Image + ", now revision 3",
			},
		},
		"an upgrade to a new image is no rollback": {
			prev: running(3, v1).history(v1).obj(),
			next: running(4, v2).history(v2, v1).obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal RolledOut: rolled out " + v2.Image + " (SignedByTrustedSigner, signer ci)",
			},
		},
		"steady state": {
			prev: running(1, v1).obj(),
			next: running(1, v1).obj(),
		},
		"the Deployment becomes available": {
			prev: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			next: running(1, v1).obj(),
		},
		"a condition message alone changes": {
			prev: status(1).sig(metav1.ConditionTrue, v1alpha1.ReasonVerified, "signed by a").ready(v1alpha1.ReasonRunning, "x").deployed(v1).obj(),
			next: status(1).sig(metav1.ConditionTrue, v1alpha1.ReasonVerified, "signed by b").ready(v1alpha1.ReasonRunning, "x").deployed(v1).obj(),
		},
		"first install awaits approval": {
			prev: status(0).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonAwaitingApproval, "waiting for approval of egress: a.example:443").pending("a.example:443").obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal NotRunning: AwaitingApproval: waiting for approval of egress: a.example:443",
			},
		},
		"approval rolls out": {
			prev: status(1).signed().ready(v1alpha1.ReasonAwaitingApproval, "w").pending("a.example:443").obj(),
			next: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			want: []string{"Normal RolledOut: rolled out " + v1.Image + " (SignedByTrustedSigner, signer ci)"},
		},
		"upgrade waits for approval": {
			prev: running(1, v1).obj(),
			next: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("static.nbp.pl:443").obj(),
			kept: waiting,
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal KeptPreviousVersion: keeps running " + v1.Image + ": " + waiting.why,
			},
		},
		"kept: the Deployment becomes available": {
			prev: status(2).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).pending("static.nbp.pl:443").obj(),
			next: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("static.nbp.pl:443").obj(),
			kept: waiting,
		},
		"kept: a narrower approval changes what is pending": {
			prev: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("a:443", "b:443").obj(),
			next: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("b:443").obj(),
			kept: waiting,
			want: []string{"Normal KeptPreviousVersion: keeps running " + v1.Image + ": " + waiting.why},
		},
		"kept: an apply fails": {
			prev:        running(1, v1).obj(),
			next:        status(2).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonProgressing, "applying failed").deployed(v1).obj(),
			kept:        refused,
			applyFailed: true,
			want: []string{
				"Warning ImageRefused: Unsigned: no signature",
				"Warning KeptPreviousVersion: keeps running " + v1.Image + ": " + refused.why,
			},
		},
		"approved upgrade rolls out": {
			prev: status(2).signed().ready(v1alpha1.ReasonRunningPreviousVersion, "p").deployed(v1).pending("static.nbp.pl:443").obj(),
			next: status(2).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v2).obj(),
			want: []string{"Normal RolledOut: rolled out " + v2.Image + " (SignedByTrustedSigner, signer ci)"},
		},
		"a config change is verified again and rolls out": {
			prev: running(1, v1).obj(),
			next: status(2).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(record("v1", 300)).obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal RolledOut: rolled out " + v1.Image + " (SignedByTrustedSigner, signer ci)",
			},
		},
		"grant deleted": {
			prev: running(2, v2).obj(),
			next: status(2).signed().ready(v1alpha1.ReasonNoGrant, "no PluginGrant named p; nothing runs").pending("x:443").obj(),
			want: []string{"Normal Revoked: " + v2.Image + " was torn down: no PluginGrant named p; nothing runs"},
		},
		"the running version's image is refused now": {
			prev: running(1, v1).obj(),
			next: status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUntrustedSigner, "signed by mallory").
				ready(v1alpha1.ReasonInvalidPreviousVersion, "the running version's image is refused: signed by mallory").obj(),
			want: []string{
				"Warning ImageRefused: UntrustedSigner: signed by mallory",
				"Warning Stopped: " + v1.Image + " was torn down: InvalidPreviousVersion: the running version's image is refused: signed by mallory",
			},
		},
		"first install refused": {
			prev: status(1).ready(v1alpha1.ReasonNoGrant, "no grant").obj(),
			next: status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonSignatureNotVerified, "no signature").obj(),
			want: []string{"Warning ImageRefused: Unsigned: no signature"},
		},
		"refused again with another image": {
			prev: status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonSignatureNotVerified, "x").obj(),
			next: status(2).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "no signature").ready(v1alpha1.ReasonSignatureNotVerified, "x").obj(),
			want: []string{"Warning ImageRefused: Unsigned: no signature"},
		},
		"registry down, the running version stays": {
			prev: running(1, v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "cannot read it").
				ready(v1alpha1.ReasonRunning, "running").deployed(v1).obj(),
			want: []string{"Warning RegistryUnavailable: cannot read it"},
		},
		"registry refuses the read, the running version stays": {
			prev: running(1, v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnauthorized, "refused the anonymous read").
				ready(v1alpha1.ReasonRunning, "running").deployed(v1).obj(),
			want: []string{"Warning RegistryUnauthorized: refused the anonymous read"},
		},
		"registry down, then refusing the read": {
			prev: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "timeout").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnauthorized, "refused").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
			want: []string{"Warning RegistryUnauthorized: refused"},
		},
		"registry still down, another error": {
			prev: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "timeout").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonRegistryUnavailable, "refused").ready(v1alpha1.ReasonRunning, "r").deployed(v1).obj(),
		},
		"invalid spec on first install": {
			prev: status(0).obj(),
			next: status(1).sig(metav1.ConditionUnknown, v1alpha1.ReasonInvalidSpec, "not checked").ready(v1alpha1.ReasonInvalidSpec, "bad name").obj(),
			want: []string{"Warning NotRunning: InvalidSpec: bad name"},
		},
		"no grant, the spec is edited": {
			prev: status(1).signed().ready(v1alpha1.ReasonNoGrant, "no PluginGrant named p; nothing runs").obj(),
			next: status(2).sig(metav1.ConditionTrue, v1alpha1.ReasonSignedByTrustedSigner, "signed by trusted signer ci").ready(v1alpha1.ReasonNoGrant, "no PluginGrant named p; nothing runs").obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Normal NotRunning: NoGrant: no PluginGrant named p; nothing runs",
			},
		},
		"no grant, the message alone changes": {
			prev: status(1).signed().ready(v1alpha1.ReasonInvalidGrant, "bad a").obj(),
			next: status(1).signed().ready(v1alpha1.ReasonInvalidGrant, "bad b").obj(),
		},
		"cluster unavailable parks": {
			prev: running(1, v1).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "Service openfief-core: not found").deployed(v1).obj(),
			want: []string{"Warning Parked: Service openfief-core: not found; " + v1.Image +
				" is parked at zero replicas and resumes when the Services are usable again"},
		},
		"cluster unavailable, another message": {
			prev: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "a").deployed(v1).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "b").deployed(v1).obj(),
		},
		"cluster unavailable on first install": {
			prev: status(0).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "no proxy").obj(),
			want: []string{
				"Normal ImageVerified: SignedByTrustedSigner: signed by trusted signer ci",
				"Warning Parked: no proxy; nothing runs",
			},
		},
		"resumed": {
			prev: status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "a").deployed(v1).obj(),
			next: status(1).signed().ready(v1alpha1.ReasonProgressing, "waiting").deployed(v1).obj(),
			want: []string{"Normal Resumed: the core's and the proxy's Services are usable again; " + v1.Image + " runs again"},
		},
		"resuming, but the apply fails": {
			prev:        status(1).signed().ready(v1alpha1.ReasonClusterUnavailable, "a").deployed(v1).obj(),
			next:        status(1).signed().ready(v1alpha1.ReasonProgressing, "applying failed").deployed(v1).obj(),
			applyFailed: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range pluginEvents(tt.prev, tt.next, tt.kept, tt.applyFailed) {
				got = append(got, e.Type+" "+e.Reason+": "+e.Note)
				if e.Action == "" {
					t.Errorf("%s has no action", e.Reason)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordEventsCutsNotesAndToleratesNoRecorder(t *testing.T) {
	p := testutil.MakePlugin("cut", testutil.Image("cut-1")).Obj()
	p.Status = *status(1).sig(metav1.ConditionFalse, v1alpha1.ReasonUnsigned, "100% "+strings.Repeat("x", 2*MaxMessageBytes)).obj()
	prev := status(0).obj()

	(&PluginReconciler{}).recordEvents(p, prev, &pass{}) // no recorder: no panic

	rec := events.NewFakeRecorder(10)
	(&PluginReconciler{Recorder: rec}).recordEvents(p, prev, &pass{})
	got := <-rec.Events
	note, ok := strings.CutPrefix(got, "Warning ImageRefused ")
	if !ok || len(note) > MaxMessageBytes || !strings.HasPrefix(note, "Unsigned: 100% xxx") || !strings.HasSuffix(note, "...") {
		t.Errorf("event %.80q... (%d bytes), want a Warning ImageRefused note cut to %d bytes, %% kept", got, len(got), MaxMessageBytes)
	}
}
