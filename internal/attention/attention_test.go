package attention

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// ago is a time d before now.
func ago(d time.Duration) *time.Time {
	t := now.Add(-d)
	return &t
}

func n(v int64) *int64 { return &v }

// plugin builds a Plugin with conditions given as type=status/reason.
func plugin(name string, conds ...string) v1alpha1.Plugin {
	p := v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}}
	for _, c := range conds {
		typ, rest, _ := strings.Cut(c, "=")
		status, reason, _ := strings.Cut(rest, "/")
		p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{
			Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: reason + " message",
			LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Hour)),
		})
	}
	return p
}

// Conditions of the usual states.
var (
	running  = []string{"Ready=True/Running", "SignatureVerified=True/SignedByTrustedSigner", "ApprovalRequired=False/NothingPending"}
	noGrant  = []string{"Ready=False/NoGrant", "SignatureVerified=True/SignedByTrustedSigner", "ApprovalRequired=True/PermissionsPending"}
	previous = []string{"Ready=True/RunningPreviousVersion", "SignatureVerified=True/Verified", "ApprovalRequired=True/PermissionsPending"}
)

// connector is a called connector's status with an hourly interval.
func connector(name string, last *time.Time, ok bool, errText string) ownerapi.InstanceStatus {
	return ownerapi.InstanceStatus{Plugin: name, Instance: name, Scheduled: true, IntervalSeconds: 3600, LastSync: last, LastOK: ok, LastError: errText}
}

// view is a called view's status.
func view(name string, last *time.Time, ok bool, lag *int64) ownerapi.InstanceStatus {
	st := connector(name, last, ok, "")
	st.View, st.Lag = true, lag
	if !ok {
		st.LastError = "webdav: 507 Insufficient Storage"
	}
	return st
}

func TestCompute(t *testing.T) {
	threeHoursAgo := ago(3 * time.Hour)
	for name, tc := range map[string]struct {
		in   Input
		want []Item
	}{
		"nothing: running, synced, exported": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", running...), plugin("dav", running...)}, CoreRead: true,
				Core: []ownerapi.InstanceStatus{connector("fx", ago(10*time.Minute), true, ""), view("dav", ago(time.Minute), true, n(3))}},
		},
		"the last sync failed": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", running...)}, CoreRead: true,
				Core: []ownerapi.InstanceStatus{connector("fx", ago(2*time.Hour), false, "flex: token expired\n\x1b[31mred")}},
			want: []Item{{Kind: KindSyncFailing, Plugin: "fx", Reason: "LastSyncFailed", Since: ago(2 * time.Hour), Command: "openfief plugin status fx",
				Message: `the last sync of fx failed 120m ago: flex: token expired \x1b[31mred`}},
		},
		"no sync succeeded in twice the interval": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", running...)}, CoreRead: true,
				Core: []ownerapi.InstanceStatus{connector("fx", threeHoursAgo, true, "")}},
			want: []Item{{Kind: KindSyncOverdue, Plugin: "fx", Reason: "NoSyncInTwiceItsInterval", Since: threeHoursAgo, Command: "openfief plugin status fx",
				Message: "the last sync of fx succeeded 3h ago, more than twice its interval of 1h"}},
		},
		"within twice the interval": {
			in: Input{CoreRead: true, Core: []ownerapi.InstanceStatus{connector("fx", ago(119*time.Minute), true, "")}},
		},
		"never synced though running for three intervals": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", running...)}, CoreRead: true,
				Core: []ownerapi.InstanceStatus{connector("fx", nil, false, "")}},
			want: []Item{{Kind: KindSyncOverdue, Plugin: "fx", Reason: "NoSyncInTwiceItsInterval", Since: threeHoursAgo, Command: "openfief plugin status fx",
				Message: "no sync of fx yet, though it has run for 3h, more than twice its interval of 1h"}},
		},
		"never synced, running for less than twice the interval": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", running...)}, CoreRead: true,
				Core: []ownerapi.InstanceStatus{{Plugin: "fx", Instance: "fx", Scheduled: true, IntervalSeconds: 4 * 3600}}},
		},
		"a core that does not say the interval": {
			in: Input{CoreRead: true, Core: []ownerapi.InstanceStatus{{Plugin: "fx", Instance: "fx", Scheduled: true, LastSync: ago(30 * 24 * time.Hour), LastOK: true}}},
		},
		"the last export failed, entries waiting": {
			in: Input{CoreRead: true, Core: []ownerapi.InstanceStatus{view("dav", ago(5*time.Minute), false, n(42))}},
			want: []Item{{Kind: KindExportFailing, Plugin: "dav", Reason: "LastExportFailed", Since: ago(5 * time.Minute), Lag: n(42), Command: "openfief plugin status dav",
				Message: "the last export of dav failed 5m ago (42 entries not sent): webdav: 507 Insufficient Storage"}},
		},
		"a view behind": {
			in: Input{CoreRead: true, Core: []ownerapi.InstanceStatus{view("dav", ago(20*time.Minute), true, n(7))}},
			want: []Item{{Kind: KindViewBehind, Plugin: "dav", Reason: "EntriesNotSent", Lag: n(7), Command: "openfief plugin status dav",
				Message: "view dav is behind by 7 entries; the last export ended 20m ago"}},
		},
		"a view with a lag just after an import": {
			in: Input{CoreRead: true, Core: []ownerapi.InstanceStatus{view("dav", ago(time.Minute), true, n(7))}},
		},
		"waiting for approval, nothing granted": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", noGrant...)}},
			want: []Item{{Kind: KindApprovalPending, Plugin: "fx", Reason: "NoGrant", Since: threeHoursAgo, Command: "openfief plugin approve fx",
				Message: "plugin fx waits for your approval (NoGrant); nothing of it runs"}},
		},
		"an upgrade waiting for approval": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", previous...)}, Commands: Commands{Approve: func(n string) string { return "openfief plugin approve " + n + " --context home" }}},
			want: []Item{{Kind: KindApprovalPending, Plugin: "fx", Reason: "RunningPreviousVersion", Since: threeHoursAgo, Command: "openfief plugin approve fx --context home",
				Message: "plugin fx waits for your approval (RunningPreviousVersion); its previous version runs"}},
		},
		"running, more requested": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", "Ready=True/Running", "ApprovalRequired=True/PermissionsPending")}},
			want: []Item{{Kind: KindApprovalPending, Plugin: "fx", Reason: "PermissionsPending", Since: threeHoursAgo, Command: "openfief plugin approve fx",
				Message: "plugin fx waits for your approval (PermissionsPending); it runs with what is granted"}},
		},
		"refused image hides the pending approval": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", "Ready=False/NoGrant", "SignatureVerified=False/Unsigned", "ApprovalRequired=True/PermissionsPending")}},
			want: []Item{{Kind: KindImageRefused, Plugin: "fx", Reason: "Unsigned", Since: threeHoursAgo, Command: "openfief plugin status fx",
				Message: "the operator refused the image of fx (Unsigned): Unsigned message"}},
		},
		"registry unauthorized": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", "Ready=True/Running", "SignatureVerified=Unknown/RegistryUnauthorized")}},
			want: []Item{{Kind: KindImageUnchecked, Plugin: "fx", Reason: "RegistryUnauthorized", Since: threeHoursAgo, Command: "openfief plugin status fx",
				Message: "the image of fx is not verified yet (RegistryUnauthorized): RegistryUnauthorized message"}},
		},
		"invalid config": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", "Ready=False/InvalidConfig", "SignatureVerified=True/Verified")}},
			want: []Item{{Kind: KindPluginInvalid, Plugin: "fx", Reason: "InvalidConfig", Since: threeHoursAgo, Command: "openfief plugin status fx",
				Message: "plugin fx does not run as asked (InvalidConfig): InvalidConfig message"}},
		},
		"progressing and not reconciled yet are not the owner's to act on": {
			in: Input{Plugins: []v1alpha1.Plugin{plugin("fx", "Ready=False/Progressing"), plugin("new")}},
		},
		"removed and uncalled instances": {
			in: Input{CoreRead: true, Core: []ownerapi.InstanceStatus{
				{Plugin: "old", Instance: "old~0a1b2c3d", Removed: true, LastSync: ago(100 * time.Hour), IntervalSeconds: 3600},
				{Plugin: "revoked", Instance: "revoked", LastSync: ago(time.Hour), LastError: "x"},
			}},
		},
		"platform component down": {
			in: Input{Components: []Component{{Name: "openfief-operator", Available: "True", Ready: "1/1"}, {Name: "openfief-core", Available: "False (MinimumReplicasUnavailable)", Ready: "0/1"}},
				Commands: Commands{Platform: "openfief platform status --context home"}},
			want: []Item{{Kind: KindPlatformUnavailable, Component: "openfief-core", Reason: "False (MinimumReplicasUnavailable)", Command: "openfief platform status --context home",
				Message: "platform component openfief-core is not available: False (MinimumReplicasUnavailable), 0/1 replicas ready"}},
		},
		"core unreachable": {
			in: Input{CoreError: "no openfief-core answered (HTTP 503): no endpoints available\r\n"},
			want: []Item{{Kind: KindCoreUnreachable, Command: "openfief platform status",
				Message: "openfief-core did not answer, so nothing is known of syncs and exports: no openfief-core answered (HTTP 503): no endpoints available"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			in.Now = now
			if diff := cmp.Diff(tc.want, Compute(in)); diff != "" {
				t.Errorf("Compute (-want +got):\n%s", diff)
			}
		})
	}
}

// TestComputeOrder: most urgent first by kind, then by name, whatever the
// order of the input.
func TestComputeOrder(t *testing.T) {
	ps := []v1alpha1.Plugin{
		plugin("zz-pending", noGrant...), plugin("aa-pending", noGrant...), plugin("refused", "SignatureVerified=False/UntrustedSigner"),
		plugin("fx", running...), plugin("dav", running...),
	}
	core := []ownerapi.InstanceStatus{view("dav", ago(time.Hour), true, n(1)), connector("fx", ago(time.Hour), false, "down")}
	comps := []Component{{Name: "openfief-proxy", Available: "False"}}
	want := []string{
		"PlatformUnavailable openfief-proxy", "CoreUnreachable ", "SyncFailing fx", "ViewBehind dav",
		"ImageRefused refused", "ApprovalPending aa-pending", "ApprovalPending zz-pending",
	}
	for range 2 {
		got := Compute(Input{Now: now, Plugins: ps, Core: core, CoreRead: true, CoreError: "timeout", Components: comps})
		var keys []string
		for _, it := range got {
			keys = append(keys, string(it.Kind)+" "+it.Plugin+it.Component)
		}
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("order (-want +got):\n%s", diff)
		}
		// Reversed input, same output.
		for i, j := 0, len(ps)-1; i < j; i, j = i+1, j-1 {
			ps[i], ps[j] = ps[j], ps[i]
		}
		core[0], core[1] = core[1], core[0]
	}
}

// FuzzComputeText: whatever the cluster and the core wrote, every item is
// one line of safe text.
func FuzzComputeText(f *testing.F) {
	f.Add("fx", "no signature\n\x1b]0;title\x07", "token expired\u202e", "False (x\ty)")
	f.Fuzz(func(t *testing.T, name, condMsg, lastErr, available string) {
		p := plugin(name, "Ready=False/NoGrant", "SignatureVerified=False/Unsigned")
		p.Status.Conditions[1].Message = condMsg
		st := connector(name, ago(time.Hour), false, lastErr)
		items := Compute(Input{Now: now, Plugins: []v1alpha1.Plugin{p}, Core: []ownerapi.InstanceStatus{st}, CoreRead: true, CoreError: lastErr,
			Components: []Component{{Name: name, Available: available, Ready: condMsg}}})
		for _, it := range items {
			for _, s := range []string{it.Message, it.Plugin, it.Component, it.Reason, it.Command} {
				for _, r := range s {
					if plugins.IsUnsafeRune(r) || r == '\n' || r == '\r' {
						t.Fatalf("item %+v holds %U", it, r)
					}
				}
			}
		}
	})
}
