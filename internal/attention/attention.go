// Package attention computes what needs the owner's attention, without
// Prometheus: connectors whose syncs fail or stopped, views that fail or
// fall behind, plugins waiting for approval, images the operator refused,
// and platform components that are not available. `openfief status` prints
// the list and the dashboard shows it at the top of its page; both call
// Compute, so they say the same thing in the same order.
//
// Compute is a pure function of what the caller read (the Plugins, the
// core's owner API status, the platform's Deployments) and the time; it
// reads nothing itself. Every string it returns that came from the cluster
// or the core has been through internal/display.
package attention

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
)

// Kind names what needs attention. The kinds are part of `openfief status
// -o json`'s output: they never change meaning.
type Kind string

// The kinds, most urgent first: Compute orders items by this list.
const (
	// KindPlatformUnavailable: a platform Deployment is not Available.
	KindPlatformUnavailable Kind = "PlatformUnavailable"
	// KindCoreUnreachable: openfief-core's owner API did not answer, so
	// nothing is known of syncs and exports.
	KindCoreUnreachable Kind = "CoreUnreachable"
	// KindSyncFailing: a connector's last sync failed.
	KindSyncFailing Kind = "SyncFailing"
	// KindSyncOverdue: no sync of a connector succeeded in twice its
	// interval.
	KindSyncOverdue Kind = "SyncOverdue"
	// KindExportFailing: a view's last export failed.
	KindExportFailing Kind = "ExportFailing"
	// KindExportOverdue: no export to a view succeeded in twice its
	// interval.
	KindExportOverdue Kind = "ExportOverdue"
	// KindViewBehind: a view has entries it was not sent, and no export
	// ended within ViewBehindAfter.
	KindViewBehind Kind = "ViewBehind"
	// KindImageRefused: the operator refused the image
	// (SignatureVerified=False: Unsigned, UntrustedSigner, ManifestMismatch,
	// InvalidImage); nothing new of it runs.
	KindImageRefused Kind = "ImageRefused"
	// KindImageUnchecked: the registry could not be read or refused the
	// read (SignatureVerified=Unknown), so the image is not verified yet.
	KindImageUnchecked Kind = "ImageUnchecked"
	// KindPluginInvalid: the Plugin or its grant does not pass validation
	// (Ready reasons InvalidSpec, InvalidConfig, InvalidGrant,
	// InvalidPreviousVersion).
	KindPluginInvalid Kind = "PluginInvalid"
	// KindApprovalPending: the plugin waits for the owner's approval (Ready
	// reasons NoGrant, AwaitingApproval, NothingGranted,
	// RunningPreviousVersion, or ApprovalRequired=True).
	KindApprovalPending Kind = "ApprovalPending"
)

// Kinds are every kind, most urgent first.
var Kinds = []Kind{
	KindPlatformUnavailable, KindCoreUnreachable,
	KindSyncFailing, KindSyncOverdue, KindExportFailing, KindExportOverdue, KindViewBehind,
	KindImageRefused, KindImageUnchecked, KindPluginInvalid, KindApprovalPending,
}

// ViewBehindAfter is how long a view may have entries it was not sent
// before it counts as behind: after an import a view waits a moment and
// then exports, so a lag alone, right after an import, is no problem.
const ViewBehindAfter = 15 * time.Minute

// messageMax bounds an item's message, so one line stays one line.
const messageMax = 400

// Item is one thing that needs attention. Its JSON field names are
// `openfief status -o json`'s and never change.
type Item struct {
	// Command is what to run next.
	Command string `json:"command"`
	// Component is the platform Deployment, for KindPlatformUnavailable.
	Component string `json:"component,omitempty"`
	// Kind says what is wrong.
	Kind Kind `json:"kind"`
	// Lag is a view's entries not sent yet, when the core counted them.
	Lag *int64 `json:"lag,omitempty"`
	// Message says it in words, on one line, escaped.
	Message string `json:"message"`
	// Plugin is the Plugin (the instance) concerned, "" for the platform.
	Plugin string `json:"plugin,omitempty"`
	// Reason is the condition reason or the core's state behind Kind.
	Reason string `json:"reason,omitempty"`
	// Since is when it started, when known: the last failed sync, the
	// condition's last transition.
	Since *time.Time `json:"since,omitempty"`
}

// Component is a platform Deployment as the caller read it.
type Component struct {
	// Name is the Deployment's name.
	Name string
	// Available is its Available condition's status, with the reason when
	// not True ("False (MinimumReplicasUnavailable)").
	Available string
	// Ready is "<available>/<wanted>" replicas.
	Ready string
}

// Commands build the commands an item names; the CLI supplies them, so an
// item names exactly what it takes (with --kubeconfig and -n as given).
type Commands struct {
	// Approve returns the command that approves what a plugin waits for.
	Approve func(name string) string
	// Status returns the command that shows one plugin in detail.
	Status func(name string) string
	// Platform is the command that shows the platform's components.
	Platform string
}

// DefaultCommands are the commands without global flags.
var DefaultCommands = Commands{
	Approve:  func(name string) string { return "openfief plugin approve " + name },
	Status:   func(name string) string { return "openfief plugin status " + name },
	Platform: "openfief platform status",
}

// Input is what Compute looks at.
type Input struct {
	// Now is the time the core's records are judged against.
	Now time.Time
	// Plugins are the namespace's Plugins.
	Plugins []v1alpha1.Plugin
	// Core is the owner API's status of every instance (removed ones are
	// ignored); CoreRead says whether it was asked and answered. CoreError,
	// when set, is why it did not answer.
	Core      []ownerapi.InstanceStatus
	CoreRead  bool
	CoreError string
	// Components are the platform's Deployments; nil when not read.
	Components []Component
	// Commands build the commands items name; DefaultCommands when zero.
	Commands Commands
}

// Compute returns what needs attention in in, most urgent first (the order
// of Kinds), then by plugin or component name: the same input gives the
// same list.
func Compute(in Input) []Item {
	cmds := in.Commands
	if cmds.Approve == nil {
		cmds.Approve = DefaultCommands.Approve
	}
	if cmds.Status == nil {
		cmds.Status = DefaultCommands.Status
	}
	if cmds.Platform == "" {
		cmds.Platform = DefaultCommands.Platform
	}
	// A command names what the cluster or the core named: shown escaped.
	approve, status := cmds.Approve, cmds.Status
	cmds.Approve = func(name string) string { return display.Text(approve(name)) }
	cmds.Status = func(name string) string { return display.Text(status(name)) }
	cmds.Platform = display.Text(cmds.Platform)
	var items []Item
	for _, c := range in.Components {
		if c.Available == string(metav1.ConditionTrue) {
			continue
		}
		items = append(items, Item{
			Kind: KindPlatformUnavailable, Component: display.Text(c.Name), Reason: display.Text(c.Available), Command: cmds.Platform,
			Message: fmt.Sprintf("platform component %s is not available: %s, %s replicas ready", display.Text(c.Name), display.Text(c.Available), display.Text(c.Ready)),
		})
	}
	if in.CoreError != "" {
		items = append(items, Item{
			Kind: KindCoreUnreachable, Command: cmds.Platform,
			Message: "openfief-core did not answer, so nothing is known of syncs and exports: " + line(in.CoreError),
		})
	}
	running := map[string]*v1alpha1.Plugin{}
	for i := range in.Plugins {
		p := &in.Plugins[i]
		running[p.Name] = p
		items = append(items, pluginItems(p, cmds)...)
	}
	if in.CoreRead {
		for _, st := range in.Core {
			if st.Removed || !st.Scheduled {
				continue
			}
			items = append(items, coreItems(in.Now, st, running[st.Plugin], cmds)...)
		}
	}
	rank := map[Kind]int{}
	for i, k := range Kinds {
		rank[k] = i
	}
	slices.SortStableFunc(items, func(a, b Item) int {
		return cmp.Or(cmp.Compare(rank[a.Kind], rank[b.Kind]), cmp.Compare(a.Plugin, b.Plugin), cmp.Compare(a.Component, b.Component))
	})
	return items
}

// pluginItems are what the Plugin's conditions say needs attention: a
// refused image hides a pending approval, since approving would run
// nothing.
func pluginItems(p *v1alpha1.Plugin, cmds Commands) []Item {
	name := display.Text(p.Name)
	sig := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if sig != nil && sig.Status == metav1.ConditionFalse {
		return []Item{{
			Kind: KindImageRefused, Plugin: name, Reason: display.Text(sig.Reason), Since: since(sig), Command: cmds.Status(p.Name),
			Message: fmt.Sprintf("the operator refused the image of %s (%s): %s", name, display.Text(sig.Reason), line(sig.Message)),
		}}
	}
	var out []Item
	if sig != nil && sig.Status == metav1.ConditionUnknown &&
		(sig.Reason == v1alpha1.ReasonRegistryUnavailable || sig.Reason == v1alpha1.ReasonRegistryUnauthorized) {
		out = append(out, Item{
			Kind: KindImageUnchecked, Plugin: name, Reason: display.Text(sig.Reason), Since: since(sig), Command: cmds.Status(p.Name),
			Message: fmt.Sprintf("the image of %s is not verified yet (%s): %s", name, display.Text(sig.Reason), line(sig.Message)),
		})
	}
	ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	approval := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionApprovalRequired)
	reason := ""
	if ready != nil {
		reason = ready.Reason
	}
	switch reason {
	case v1alpha1.ReasonInvalidSpec, v1alpha1.ReasonInvalidConfig, v1alpha1.ReasonInvalidGrant, v1alpha1.ReasonInvalidPreviousVersion:
		return append(out, Item{
			Kind: KindPluginInvalid, Plugin: name, Reason: reason, Since: since(ready), Command: cmds.Status(p.Name),
			Message: fmt.Sprintf("plugin %s does not run as asked (%s): %s", name, reason, line(ready.Message)),
		})
	}
	pending := approval != nil && approval.Status == metav1.ConditionTrue
	waiting := v1alpha1.ReasonPermissionsPending
	switch reason {
	case v1alpha1.ReasonNoGrant, v1alpha1.ReasonAwaitingApproval, v1alpha1.ReasonNothingGranted, v1alpha1.ReasonRunningPreviousVersion:
		pending, waiting = true, reason
	}
	if pending {
		what := "nothing of it runs"
		switch {
		case reason == v1alpha1.ReasonRunningPreviousVersion:
			what = "its previous version runs"
		case ready != nil && ready.Status == metav1.ConditionTrue:
			what = "it runs with what is granted"
		}
		from := ready
		if approval != nil && approval.Status == metav1.ConditionTrue {
			from = approval
		}
		out = append(out, Item{
			Kind: KindApprovalPending, Plugin: name, Reason: waiting, Since: since(from), Command: cmds.Approve(p.Name),
			Message: fmt.Sprintf("plugin %s waits for your approval (%s); %s", name, waiting, what),
		})
	}
	return out
}

// coreItems are what the core's record of a called instance says: its last
// call failed, none succeeded in twice its interval, or (a view) entries
// wait to be sent. p is its Plugin, if the caller read it: its Ready
// condition tells since when it runs, for an instance never called yet.
func coreItems(now time.Time, st ownerapi.InstanceStatus, p *v1alpha1.Plugin, cmds Commands) []Item {
	name := display.Text(st.Plugin)
	failing, overdue, call := KindSyncFailing, KindSyncOverdue, "sync"
	if st.View {
		failing, overdue, call = KindExportFailing, KindExportOverdue, "export"
	}
	interval := time.Duration(st.IntervalSeconds) * time.Second
	cmd := cmds.Status(st.Plugin)
	switch {
	case st.LastSync != nil && !st.LastOK:
		at := st.LastSync.UTC()
		return []Item{{
			Kind: failing, Plugin: name, Reason: "Last" + title(call) + "Failed", Since: &at, Lag: st.Lag, Command: cmd,
			Message: fmt.Sprintf("the last %s of %s failed %s ago%s: %s", call, name, display.Age(now, at), lagText(st.Lag), line(st.LastError)),
		}}
	case interval > 0 && st.LastSync != nil && now.Sub(*st.LastSync) > 2*interval:
		at := st.LastSync.UTC()
		return []Item{{
			Kind: overdue, Plugin: name, Reason: "No" + title(call) + "InTwiceItsInterval", Since: &at, Lag: st.Lag, Command: cmd,
			Message: fmt.Sprintf("the last %s of %s succeeded %s ago, more than twice its interval of %s%s", call, name, display.Age(now, at), durationText(interval), lagText(st.Lag)),
		}}
	case interval > 0 && st.LastSync == nil && p != nil:
		ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || now.Sub(ready.LastTransitionTime.Time) <= 2*interval {
			break
		}
		at := ready.LastTransitionTime.UTC()
		return []Item{{
			Kind: overdue, Plugin: name, Reason: "No" + title(call) + "InTwiceItsInterval", Since: &at, Lag: st.Lag, Command: cmd,
			Message: fmt.Sprintf("no %s of %s yet, though it has run for %s, more than twice its interval of %s%s", call, name, display.Age(now, at), durationText(interval), lagText(st.Lag)),
		}}
	}
	if st.View && st.Lag != nil && *st.Lag > 0 && (st.LastSync == nil || now.Sub(*st.LastSync) > ViewBehindAfter) {
		last := "no export yet"
		if st.LastSync != nil {
			last = "the last export ended " + display.Age(now, *st.LastSync) + " ago"
		}
		return []Item{{
			Kind: KindViewBehind, Plugin: name, Reason: "EntriesNotSent", Lag: st.Lag, Command: cmd,
			Message: fmt.Sprintf("view %s is behind by %d entries; %s", name, *st.Lag, last),
		}}
	}
	return nil
}

// lagText says a view's lag after a failure, when there is one.
func lagText(lag *int64) string {
	if lag == nil || *lag == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d entries not sent)", *lag)
}

// durationText shows an interval without its zero parts: 1h, 15m, 1h30m.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// since is a condition's last transition, nil when unset.
func since(c *metav1.Condition) *time.Time {
	if c == nil || c.LastTransitionTime.IsZero() {
		return nil
	}
	t := c.LastTransitionTime.UTC()
	return &t
}

// line is outside text on one line: whitespace runs folded to one space,
// then escaped and bounded.
func line(s string) string {
	return display.Limit(strings.Join(strings.Fields(s), " "), messageMax)
}

// title capitalises a call's name for a reason: "sync" gives "Sync".
func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
