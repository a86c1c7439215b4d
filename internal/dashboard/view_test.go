package dashboard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestSignatureWordsTellVerifiedFromSigned: every reason reads differently,
// and the two admitted ones differ in their first word and symbol, so colour
// is never the only difference (D-56).
func TestSignatureWordsTellVerifiedFromSigned(t *testing.T) {
	seen := map[string]string{}
	for reason := range signatureWords {
		c := signatureCell(reason)
		if other, dup := seen[c.Text]; dup {
			t.Errorf("%s and %s both read %q", reason, other, c.Text)
		}
		seen[c.Text] = reason
		if !strings.Contains(c.Detail, reason) {
			t.Errorf("%s: detail %q does not name the reason", reason, c.Detail)
		}
	}
	v, s := signatureCell(v1alpha1.ReasonVerified), signatureCell(v1alpha1.ReasonSignedByTrustedSigner)
	if strings.Fields(v.Text)[0] == strings.Fields(s.Text)[0] || strings.Fields(v.Text)[1] == strings.Fields(s.Text)[1] {
		t.Errorf("Verified %q and SignedByTrustedSigner %q start alike", v.Text, s.Text)
	}
	if strings.Contains(s.Text, "Verified") {
		t.Errorf("only-signed reads %q, which says Verified", s.Text)
	}
	for reason, tone := range map[string]string{"": toneUnknown, "SomethingNew": toneUnknown, v1alpha1.ReasonUnsigned: toneRefused} {
		if got := signatureCell(reason).Tone; got != tone {
			t.Errorf("%q: tone %q, want %q", reason, got, tone)
		}
	}
}

// TestSignerCell names a signer's kind only when the trust policy holds it.
func TestSignerCell(t *testing.T) {
	owner := plugins.Signer{Name: "me", Kind: plugins.SignerOwner, Identity: plugins.SignerIdentity{Issuer: "https://accounts.example.com", Subject: "me@example.com"}}
	policy, err := plugins.NewTrustPolicy(plugins.Catalog{}, []plugins.Signer{owner})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		signer string
		policy *plugins.TrustPolicy
		want   Cell
	}{
		"owner":        {"me", &policy, Cell{Text: "me", Detail: "Owner's signer: issuer https://accounts.example.com, subject me@example.com"}},
		"ci":           {"openfief-ci", &policy, Cell{Text: "openfief-ci", Detail: "OpenFief CI: issuer " + plugins.GitHubActionsIssuer + ", subject " + plugins.OpenFiefCISubject}},
		"unknown name": {"someone", &policy, Cell{Text: "someone", Detail: "kind unknown: not in the trust policy this dashboard read", Tone: toneUnknown}},
		"no policy":    {"me", nil, Cell{Text: "me", Detail: "kind unknown: not in the trust policy this dashboard read", Tone: toneUnknown}},
		"none":         {"", &policy, Cell{Text: "—", Detail: "no trusted signer"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := signerCell(tc.signer, tc.policy); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOwnerSignerNamedAsCI: an owner signers.json whose key is named
// openfief-ci gives the dashboard no policy (as the operator trusts no owner
// signer then), so a signature recorded under that name is never described
// as OpenFief's CI with the CI's identity; a valid file names its signer.
func TestOwnerSignerNamedAsCI(t *testing.T) {
	owner := func(name string) []byte {
		return []byte(`{"signers": [{"name": "` + name + `", "issuer": "https://accounts.example.com", "subject": "me@example.com"}]}`)
	}
	if p := ownerPolicy(plugins.Catalog{}, owner("openfief-ci")); p != nil {
		t.Errorf("an owner key named openfief-ci gave a policy; openfief-ci is shown as %+v", signerCell("openfief-ci", p))
	}
	p := ownerPolicy(plugins.Catalog{}, owner("me"))
	if p == nil {
		t.Fatal("a valid signers.json gave no policy")
	}
	if got := signerCell("me", p).Detail; got != "Owner's signer: issuer https://accounts.example.com, subject me@example.com" {
		t.Errorf("me: %q", got)
	}
}

// TestSnapshot builds the table and a page from plain resources: rows
// sorted, pending from the domain, the approve command only when something
// is pending, and a signer read only from a status of the current
// generation.
func TestSnapshot(t *testing.T) {
	s := sampleSnapshot()
	tbl := s.table()
	if len(tbl.Rows) != 2 || tbl.Rows[0].Name != "a" || tbl.Rows[1].Name != "b" {
		t.Fatalf("rows %+v, want a then b", tbl.Rows)
	}
	rowA, rowB := tbl.Rows[0].Cells, tbl.Rows[1].Cells
	if rowA[1].Text != "? Not checked yet" || rowA[2].Text != "—" {
		t.Errorf("a's status describes generation 1 of 2, yet it shows signature %q signer %q", rowA[1].Text, rowA[2].Text)
	}
	if rowA[4].Text != "Nothing pending" {
		t.Errorf("a is fully granted, pending %+v", rowA[4])
	}
	if rowB[2].Text != "me" || rowB[4].Text != "⚠ Approval pending (2)" || rowB[4].Detail != "capability connector, egress api.nbp.pl:443" {
		t.Errorf("b: signer %+v, pending %+v", rowB[2], rowB[4])
	}
	if rowB[3].Text != "sha256:"+strings.TrimPrefix(testutil.Digest("b"), "sha256:")[:12] || rowB[3].Copy != testutil.Image("b") {
		t.Errorf("b's image cell %+v", rowB[3])
	}
	if rowB[5].Text != "90s" {
		t.Errorf("b's age %q, want 90s", rowB[5].Text)
	}
	if d := s.detail("b"); d.Command != "openfief plugin approve b" || d.Gone {
		t.Errorf("b's page: command %q, gone %v", d.Command, d.Gone)
	}
	if d := s.detail("a"); d.Command != "" {
		t.Errorf("a has nothing pending, yet its page shows %q", d.Command)
	}
	if d := s.detail("b"); d.Approve != nil {
		t.Errorf("a read-only dashboard offers an approval: %+v", d.Approve)
	}
	s.canApprove = true
	d := s.detail("b")
	if d.Approve == nil || d.Approve.GrantVersion != "" || !strings.Contains(d.Approve.Question, "Approve for plugin b: capability connector, egress api.nbp.pl:443?") ||
		!strings.Contains(d.Approve.Question, "◐ Signed, not verified") {
		t.Errorf("b's approval offer %+v", d.Approve)
	}
	if d := s.detail("a"); d.Approve != nil {
		t.Errorf("a has nothing pending, yet its page offers %+v", d.Approve)
	}
	if d := s.detail("c"); !d.Gone {
		t.Errorf("a page for a plugin that does not exist: %+v", d)
	}
}

// TestPrettyJSON shows a schema as written, keys sorted, markup unescaped
// (the page shows it as text), numbers exact.
func TestPrettyJSON(t *testing.T) {
	got := prettyJSON([]byte(`{"title":"\u003cb\u003e","maximum":12345678901234567890,"a":true}`))
	want := "{\n  \"a\": true,\n  \"maximum\": 12345678901234567890,\n  \"title\": \"<b>\"\n}"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := prettyJSON([]byte(`{not json`)); got != `{not json` {
		t.Errorf("invalid JSON shown as %q", got)
	}
}

// sampleSnapshot holds two plugins at now: b, whose status describes its
// current generation, waits for a grant of a capability and a host; a,
// fully granted, has a status of an older generation. Both are only signed
// by the owner's signer "me"; the approve command is on, the button off.
func sampleSnapshot() snapshot {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	status := func(p *v1alpha1.Plugin, gen int64, ready, sig, msg string) v1alpha1.Plugin {
		p.Generation, p.Status.ObservedGeneration = 2, gen
		p.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
		p.Status.Conditions = []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ready, Message: "m"},
			{Type: v1alpha1.ConditionSignatureVerified, Status: metav1.ConditionTrue, Reason: sig, Message: msg},
		}
		return *p
	}
	msg := "signed by trusted signer me; not a verified catalog plugin"
	b := status(testutil.MakePlugin("b", testutil.Image("b")).Capabilities("connector").Egress("api.nbp.pl").Obj(), 2, v1alpha1.ReasonNoGrant, v1alpha1.ReasonSignedByTrustedSigner, msg)
	a := status(testutil.MakePlugin("a", testutil.Image("a")).Capabilities("connector").Obj(), 1, v1alpha1.ReasonRunning, v1alpha1.ReasonSignedByTrustedSigner, msg)
	grantA := testutil.GrantFor(&a).Obj()
	return snapshot{
		namespace: "openfief",
		plugins:   []v1alpha1.Plugin{b, a},
		grants:    map[string]*v1alpha1.PluginGrant{"a": grantA},
		now:       now,
		approve:   func(name string) string { return "openfief plugin approve " + name },
	}
}

// TestOwnerHostsShown checks a plugin's page shows the manifest's slots for
// hosts of the owner's choosing, the owner's hosts in the grant, and a note
// when the grant lists more of them than the manifest allows (OF-36).
func TestOwnerHostsShown(t *testing.T) {
	s := sampleSnapshot()
	w := testutil.MakePlugin("webdav", testutil.Image("webdav")).Capabilities("view").OwnerEgress(1).Obj()
	s.plugins = append(s.plugins, *w)
	s.grants["webdav"] = testutil.MakeGrant("webdav").Capabilities("view").OwnerEgress("Cloud.Example.com").Obj()
	section := func(d Detail, id string) Section {
		for _, sec := range d.Sections {
			if sec.ID == id {
				return sec
			}
		}
		t.Fatalf("no section %q", id)
		return Section{}
	}
	item := func(sec Section, label string) []string {
		for _, it := range sec.Items {
			if it.Label == label {
				return it.Values
			}
		}
		return nil
	}
	d := s.detail("webdav")
	if got := item(section(d, "manifest"), "Hosts of your choosing"); len(got) != 1 || !strings.HasPrefix(got[0], "up to 1 of your choosing; the vendor names none") {
		t.Errorf("manifest's owner slots shown as %q", got)
	}
	grant := section(d, "grant")
	if got := item(grant, "Your hosts"); len(got) != 1 || got[0] != "cloud.example.com:443" {
		t.Errorf("grant's owner hosts shown as %q", got)
	}
	if grant.Note != "" {
		t.Errorf("a grant within the slots has the note %q", grant.Note)
	}
	if d.Command != "" || d.Approve != nil {
		t.Errorf("an owner host is not pending, yet the page offers %q, %+v", d.Command, d.Approve)
	}

	s.grants["webdav"].Spec.OwnerEgress = append(s.grants["webdav"].Spec.OwnerEgress, "nas.example.org")
	if note := section(s.detail("webdav"), "grant").Note; !strings.Contains(note, "lists 2 hosts of your choosing and the manifest allows 1") {
		t.Errorf("a grant over its slots has the note %q", note)
	}
	if got := item(section(s.detail("a"), "manifest"), "Hosts of your choosing"); got != nil {
		t.Errorf("a manifest without slots shows %q", got)
	}
}

// TestResourcesShown: the resources a plugin asks for beyond its grant are
// in its row's pending cell, its page's requested and pending sections and
// the question its Approve button asks.
func TestResourcesShown(t *testing.T) {
	s := sampleSnapshot()
	s.canApprove = true
	big := testutil.MakePlugin("big", testutil.Image("big")).Capabilities("connector").Obj()
	big.Spec.Manifest.Resources = &v1alpha1.Resources{Memory: "512Mi", Tmp: "128Mi"}
	s.plugins = append(s.plugins, *big)
	g := testutil.GrantFor(big).Obj()
	s.grants["big"] = g
	d := s.detail("big")
	want := "resources memory 512Mi, tmp 128Mi"
	if d.Approve == nil || !strings.Contains(d.Approve.Question, want) {
		t.Fatalf("the approval question does not name %q: %+v", want, d.Approve)
	}
	var requested, pending bool
	for _, sec := range d.Sections {
		for _, it := range sec.Items {
			if it.Label == "Resources" && len(it.Values) == 1 && strings.HasPrefix(it.Values[0], "memory 512Mi, tmp 128Mi (the defaults are memory 128Mi, cpu 500m, tmp 64Mi)") {
				requested = requested || sec.ID == "manifest"
				pending = pending || sec.ID == "pending"
			}
		}
	}
	if !requested || !pending {
		t.Errorf("resources shown as requested %v, as pending %v: %+v", requested, pending, d.Sections)
	}
}

// TestHistoryShown: a plugin's page lists status.history, newest first,
// the running revision marked, at most MaxPluginHistory of them, and says
// so when no version has run.
func TestHistoryShown(t *testing.T) {
	s := sampleSnapshot()
	now := s.now
	at := func(h int) metav1.Time { return metav1.NewTime(now.Add(time.Duration(-h) * time.Hour)) }
	last := at(1)
	p := &s.plugins[1]
	p.Status.Deployed = &v1alpha1.DeployedVersion{Image: testutil.Image("a-2")}
	for i := 7; i >= 1; i-- {
		r := v1alpha1.PluginRevision{Revision: int64(i), Image: testutil.Image(fmt.Sprintf("a-%d", i)), Signer: "owner", Trust: "SignedByTrustedSigner", FirstRan: at(8 - i)}
		if i < 7 {
			r.LastRan = &last
		}
		p.Status.History = append(p.Status.History, r)
	}
	p.Status.History[0].Image = testutil.Image("a-2")
	var history *Section
	d := s.detail(p.Name)
	for i := range d.Sections {
		if d.Sections[i].ID == "history" {
			history = &d.Sections[i]
		}
	}
	if history == nil {
		t.Fatal("no history section")
	}
	if len(history.Items) != v1alpha1.MaxPluginHistory {
		t.Fatalf("%d revisions shown, want %d: %+v", len(history.Items), v1alpha1.MaxPluginHistory, history.Items)
	}
	first, second := history.Items[0], history.Items[1]
	if first.Label != "Revision 7" || first.Values[0] != testutil.Image("a-2") || first.Values[1] != "SignedByTrustedSigner by owner" || first.Values[3] != "running" {
		t.Errorf("newest revision shown as %+v", first)
	}
	if second.Label != "Revision 6" || !strings.HasPrefix(second.Values[3], "replaced ") || !strings.HasSuffix(second.Values[3], "(60m ago)") {
		t.Errorf("second revision shown as %+v", second)
	}
	if !strings.Contains(history.Note, "openfief plugin rollback "+p.Name) {
		t.Errorf("note %q", history.Note)
	}
	for _, sec := range s.detail(s.plugins[0].Name).Sections {
		if sec.ID == "history" && (sec.Note != "No version has run yet." || len(sec.Items) != 0) {
			t.Errorf("a plugin without history shows %+v", sec)
		}
	}
}
