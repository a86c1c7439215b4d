package dashboard

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust"
)

// Cell is one table cell or summary value: a line of text, an optional
// second line, a hover title, a value to copy and a tone from the fixed set
// in words.go. Every string may hold what a vendor wrote; the templates
// show it only as text.
type Cell struct {
	Text   string
	Detail string
	Title  string
	Copy   string
	Tone   string
}

// Row is one plugin in the table: its name and the cells of the columns
// Ready, Signature, Signer, Image digest, Pending approval and Age.
type Row struct {
	Name  string
	Cells []Cell
}

// Table is the plugins page: every Plugin of the namespace, sorted by name,
// and the data openfief-core keeps of removed instances (nil when the
// dashboard does not read the core).
type Table struct {
	Namespace string
	// Attention is what needs the owner's attention, most urgent first,
	// as `openfief status` says it; empty when nothing does.
	Attention []Notice
	Rows      []Row
	Removed   *RemovedData
}

// Item is one labelled line of a section: a label and its values.
type Item struct {
	Label  string
	Values []string
	// Pre shows the values as preformatted text (a config schema).
	Pre bool
}

// Section is one titled part of a plugin's page. Alert marks a note that
// says something could not be read (the core did not answer).
type Section struct {
	ID    string
	Title string
	Note  string
	Alert bool
	Items []Item
}

// Condition is one status condition with its message.
type Condition struct {
	Type    string
	Status  string
	Reason  string
	Age     string
	Message string
}

// Detail is a plugin's page: the row's cells as a summary, the sections
// (running version, requested, granted, effective, pending, and what
// openfief-core recorded), the command that approves what is pending, the
// conditions, and the data the core keeps of earlier plugins of the name.
type Detail struct {
	Name       string
	Gone       bool
	Summary    []Item
	Signature  Cell
	Sections   []Section
	Command    string
	Conditions []Condition
	// Approve is set when the page may approve what is pending: the
	// question the owner confirms and the versions it was asked about.
	Approve *ApproveOffer
	// Removed is the data kept of removed instances of this name; nil
	// when there is none.
	Removed *RemovedData
}

// ApproveOffer is the Approve button of a plugin's page: the confirmation
// question, which lists everything the approval adds, and the resource
// versions of the Plugin and grant it describes.
type ApproveOffer struct {
	Question      string
	PluginVersion string
	GrantVersion  string
}

// snapshot is what the watches hold at one moment.
type snapshot struct {
	namespace string
	plugins   []v1alpha1.Plugin
	grants    map[string]*v1alpha1.PluginGrant
	// policy is the trust policy the operator holds, nil when the
	// dashboard could not build it (then no signer kind is shown).
	policy *plugins.TrustPolicy
	now    time.Time
	// approve returns the CLI command that approves a plugin's pending
	// requests; status the one that shows a plugin (nil: without global
	// flags).
	approve func(name string) string
	status  func(name string) string
	// canApprove puts an Approve button on the pages of plugins with
	// something pending.
	canApprove bool
	// core is openfief-core's last answer; purge returns the CLI command
	// that purges a removed instance's data.
	core  coreState
	purge func(key string) string
}

// table builds the plugins page, rows sorted by name.
func (s snapshot) table() Table {
	t := Table{Namespace: s.namespace, Attention: s.notices(), Rows: []Row{}, Removed: s.removedData()}
	ps := slices.Clone(s.plugins)
	slices.SortFunc(ps, func(a, b v1alpha1.Plugin) int { return cmp.Compare(a.Name, b.Name) })
	for i := range ps {
		p := &ps[i]
		t.Rows = append(t.Rows, Row{Name: p.Name, Cells: []Cell{
			readyCell(p),
			signatureCell(reason(p, v1alpha1.ConditionSignatureVerified)),
			signerCell(currentSigner(p), s.policy),
			imageCell(p.Spec.Image),
			pendingCell(s.pending(p)),
			{Text: display.Age(s.now, p.CreationTimestamp.Time), Title: p.CreationTimestamp.UTC().Format(time.RFC3339)},
		}})
	}
	return t.shown()
}

// detail builds the page of the plugin name; Gone when it does not exist.
func (s snapshot) detail(name string) Detail {
	i := slices.IndexFunc(s.plugins, func(p v1alpha1.Plugin) bool { return p.Name == name })
	if i < 0 {
		return Detail{Name: name, Gone: true, Summary: []Item{}, Sections: []Section{}, Conditions: []Condition{}, Removed: s.removedOf(name)}.shown()
	}
	p := &s.plugins[i]
	g := s.grants[name]
	m := apiconv.ManifestFromAPI(p.Spec.Manifest)
	pending := s.pending(p)
	ready := readyCell(p)
	signer := signerCell(currentSigner(p), s.policy)
	d := Detail{
		Name: p.Name,
		Summary: []Item{
			{Label: "Ready", Values: []string{ready.Text, ready.Detail}},
			{Label: "Signer of this image", Values: []string{signer.Text, signer.Detail}},
			{Label: "Image", Values: []string{p.Spec.Image}},
			{Label: "Age", Values: []string{display.Age(s.now, p.CreationTimestamp.Time)}},
		},
		Signature: signatureCell(reason(p, v1alpha1.ConditionSignatureVerified)),
		Sections: []Section{
			pendingSection(pending, m),
			manifestSection(m),
			grantSection(g, m),
			effectiveSection(p.Status.Effective),
			deployedSection(p, s.policy, s.now),
			historySection(p, s.now),
		},
		Conditions: conditions(p, s.now),
		Removed:    s.removedOf(p.Name),
	}
	if sec, ok := s.coreSection(p.Name); ok {
		d.Sections = append(d.Sections, sec)
	}
	if !pending.IsEmpty() && s.approve != nil {
		d.Command = s.approve(p.Name)
	}
	if !pending.IsEmpty() && s.canApprove {
		grantVersion := ""
		if g != nil {
			grantVersion = g.ResourceVersion
		}
		sig := d.Signature.Text
		d.Approve = &ApproveOffer{
			// The question's line breaks are the page's own; every value
			// in it is escaped before it is put in (OF-17).
			Question: fmt.Sprintf("Approve for plugin %s: %s?\n\nSignature: %s (%s).\nThis writes the PluginGrant %s with your credentials; the operator then runs the plugin with it.",
				display.Text(p.Name), display.Message(pendingCell(pending).Detail), display.Text(sig), display.Text(d.Signature.Detail), display.Text(p.Name)),
			PluginVersion: p.ResourceVersion,
			GrantVersion:  grantVersion,
		}
	}
	return d.shown()
}

// Bounds of a preformatted value (a config schema) as shown: each line,
// and how many lines; a valid schema is never cut (see the CLI's
// schemaLineMax).
const (
	preLineMax  = 3*plugins.MaxSchemaText + 256
	preLinesMax = 2000
)

// shown returns the table with every string rendered through
// internal/display: the page and every live part the event stream sends
// then carry no control or bidi character a vendor, a plugin or the
// operator wrote (OF-17). html/template keeps it from being markup; this
// keeps it from being reordered or forged.
func (t Table) shown() Table {
	t.Namespace = display.Text(t.Namespace)
	rows := make([]Row, len(t.Rows))
	for i, r := range t.Rows {
		rows[i] = Row{Name: display.Text(r.Name), Cells: shownCells(r.Cells)}
	}
	t.Rows = rows
	notices := make([]Notice, len(t.Attention))
	for i, n := range t.Attention {
		notices[i] = Notice{ID: display.Text(n.ID), Kind: display.Text(n.Kind), Plugin: display.Text(n.Plugin), Message: display.Message(n.Message), Command: display.Text(n.Command)}
	}
	t.Attention = notices
	t.Removed = t.Removed.shown()
	return t
}

// shown returns the page with every string rendered through
// internal/display; preformatted values and the approval question keep
// their own line breaks, each line escaped.
func (d Detail) shown() Detail {
	d.Name = display.Text(d.Name)
	d.Summary = shownItems(d.Summary)
	d.Signature = shownCells([]Cell{d.Signature})[0]
	sections := make([]Section, len(d.Sections))
	for i, s := range d.Sections {
		sections[i] = Section{ID: display.Text(s.ID), Title: display.Text(s.Title), Note: display.Message(s.Note), Alert: s.Alert, Items: shownItems(s.Items)}
	}
	d.Sections = sections
	d.Command = display.Text(d.Command)
	conds := make([]Condition, len(d.Conditions))
	for i, c := range d.Conditions {
		conds[i] = Condition{Type: display.Text(c.Type), Status: display.Text(c.Status), Reason: display.Text(c.Reason),
			Age: display.Text(c.Age), Message: display.Message(c.Message)}
	}
	d.Conditions = conds
	d.Removed = d.Removed.shown()
	if d.Approve != nil {
		d.Approve = &ApproveOffer{
			Question:      display.Lines(d.Approve.Question, display.MessageMax, preLinesMax),
			PluginVersion: display.Text(d.Approve.PluginVersion),
			GrantVersion:  display.Text(d.Approve.GrantVersion),
		}
	}
	return d
}

func shownCells(cells []Cell) []Cell {
	out := make([]Cell, len(cells))
	for i, c := range cells {
		out[i] = Cell{Text: display.Text(c.Text), Detail: display.Message(c.Detail), Title: display.Message(c.Title),
			Copy: display.Text(c.Copy), Tone: display.Text(c.Tone)}
	}
	return out
}

func shownItems(items []Item) []Item {
	if items == nil {
		return nil
	}
	out := make([]Item, len(items))
	for i, it := range items {
		values := make([]string, len(it.Values))
		for j, v := range it.Values {
			if it.Pre {
				values[j] = display.Lines(v, preLineMax, preLinesMax)
			} else {
				values[j] = display.Text(v)
			}
		}
		out[i] = Item{Label: display.Text(it.Label), Values: values, Pre: it.Pre}
	}
	return out
}

// pending is what the plugin's spec asks for beyond its grant, computed as
// the operator and `openfief plugin status` compute it (D-16).
func (s snapshot) pending(p *v1alpha1.Plugin) plugins.Pending {
	var g *plugins.Grant
	if pg := s.grants[p.Name]; pg != nil {
		dg := apiconv.GrantFromAPI(pg)
		g = &dg
	}
	return plugins.NeedsApproval(apiconv.ManifestFromAPI(p.Spec.Manifest), g)
}

// currentSigner is the signer of the current spec's image: the one named
// by its SignatureVerified condition, when that describes this generation.
func currentSigner(p *v1alpha1.Plugin) string {
	c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionSignatureVerified)
	if c == nil || p.Status.ObservedGeneration != p.Generation {
		return ""
	}
	return trust.SignerFromMessage(c.Reason, c.Message)
}

// reason is a condition's reason, "" when the operator has not written it
// for the current generation.
func reason(p *v1alpha1.Plugin, t string) string {
	c := apimeta.FindStatusCondition(p.Status.Conditions, t)
	if c == nil || p.Status.ObservedGeneration != p.Generation {
		return ""
	}
	return c.Reason
}

// readyCell is the Ready condition: its reason, and whether a version runs.
func readyCell(p *v1alpha1.Plugin) Cell {
	c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return Cell{Text: "—", Detail: "not reconciled yet", Tone: toneUnknown}
	}
	out := Cell{Text: c.Reason, Title: c.Message}
	switch c.Status {
	case metav1.ConditionTrue:
		out.Detail, out.Tone = "runs", toneOK
	case metav1.ConditionFalse:
		out.Detail, out.Tone = "nothing runs", toneRefused
	default:
		out.Detail, out.Tone = "unknown", toneUnknown
	}
	if p.Status.ObservedGeneration != p.Generation {
		out.Detail += "; the operator has not caught up with the spec"
	}
	return out
}

// imageCell shows the digest's first 12 hex digits; the full reference is
// the title and what a copy takes.
func imageCell(image string) Cell {
	repo, digest, ok := strings.Cut(image, "@sha256:")
	if !ok || len(digest) < 12 {
		return Cell{Text: image, Title: image, Copy: image}
	}
	return Cell{Text: "sha256:" + digest[:12], Detail: repo, Title: image, Copy: image}
}

// pendingCell summarises what waits for approval.
func pendingCell(p plugins.Pending) Cell {
	if p.IsEmpty() {
		return Cell{Text: "Nothing pending", Tone: toneOK}
	}
	var parts []string
	for _, c := range p.Capabilities {
		parts = append(parts, "capability "+string(c))
	}
	for _, h := range p.Egress {
		parts = append(parts, "egress "+h)
	}
	for _, s := range p.Secrets {
		parts = append(parts, "Secret "+s)
	}
	for _, t := range p.DataTiers {
		parts = append(parts, "data tier "+t)
	}
	if !p.Resources.IsZero() {
		parts = append(parts, "resources "+p.Resources.String())
	}
	return Cell{Text: fmt.Sprintf("⚠ Approval pending (%d)", len(parts)), Detail: strings.Join(parts, ", "), Tone: tonePending}
}

func pendingSection(p plugins.Pending, m plugins.Manifest) Section {
	s := Section{ID: "pending", Title: "Pending approval"}
	if p.IsEmpty() {
		s.Note = "Nothing: the grant holds everything the manifest asks for."
		return s
	}
	s.Note = "Requested by the manifest and not granted. Nothing of it runs until you approve it."
	mounts := map[string]string{}
	for _, sm := range m.Secrets {
		mounts[sm.Name] = sm.MountPath
	}
	secrets := make([]string, len(p.Secrets))
	for i, name := range p.Secrets {
		secrets[i] = name + " at " + mounts[name]
	}
	s.Items = nonEmpty(
		Item{Label: "Capabilities", Values: capabilities(p.Capabilities)},
		Item{Label: "Egress", Values: p.Egress},
		Item{Label: "Secrets", Values: secrets},
		Item{Label: "Data tiers", Values: p.DataTiers},
		Item{Label: "Resources", Values: resourcesValues(p.Resources)},
	)
	return s
}

func manifestSection(m plugins.Manifest) Section {
	secrets := make([]string, len(m.Secrets))
	for i, sm := range m.Secrets {
		secrets[i] = sm.Name + " at " + sm.MountPath
	}
	hosts := make([]string, len(m.Egress))
	for i, h := range m.Egress {
		if c, err := plugins.CanonicalEgressHost(h); err == nil {
			h = c
		}
		hosts[i] = h
	}
	s := Section{ID: "manifest", Title: "Requested (spec.manifest, the image's signed label)", Items: []Item{
		{Label: "Capabilities", Values: display.Set(capabilities(m.Capabilities))},
		{Label: "Egress", Values: display.Set(hosts)},
		{Label: "Secrets", Values: display.Set(secrets)},
		{Label: "Data tiers", Values: display.Set(m.DataTiers)},
	}}
	if m.OwnerEgress != 0 {
		s.Items = append(s.Items, Item{Label: "Hosts of your choosing", Values: []string{display.OwnerSlots(m.OwnerEgress)}})
	}
	if !m.Resources.IsZero() {
		s.Items = append(s.Items, Item{Label: "Resources", Values: resourcesValues(m.Resources)})
	}
	schema := "none (any config object)"
	if len(bytes.TrimSpace(m.ConfigSchema)) > 0 {
		schema = prettyJSON(m.ConfigSchema)
	}
	s.Items = append(s.Items, Item{Label: "Config schema", Values: []string{schema}, Pre: true})
	return s
}

// resourcesValues shows the resources asked for with the defaults beside
// them; none when r names nothing.
func resourcesValues(r plugins.Resources) []string {
	if r.IsZero() {
		return nil
	}
	return []string{r.String() + " (the defaults are " + plugins.DefaultResourceLimits().String() + ")"}
}

// grantSection shows the grant, and says when it lists more hosts of the
// owner's choosing than the manifest m has slots for (OF-36), which keeps
// the current version from running.
func grantSection(g *v1alpha1.PluginGrant, m plugins.Manifest) Section {
	s := Section{ID: "grant", Title: "Granted (PluginGrant)"}
	if g == nil {
		s.Note = "No PluginGrant: nothing is granted, nothing runs."
		return s
	}
	dg := apiconv.GrantFromAPI(g)
	if own, slots := plugins.OwnerHosts(m, &dg), m.OwnerSlots(); len(own) > slots {
		s.Note = fmt.Sprintf("The grant lists %d hosts of your choosing and the manifest allows %d: this version does not run until you remove %d from the grant's ownerEgress.",
			len(own), slots, len(own)-slots)
	}
	caps := make([]string, len(g.Spec.Capabilities))
	for i, c := range g.Spec.Capabilities {
		caps[i] = string(c)
	}
	hosts := make([]string, len(g.Spec.Egress))
	for i, h := range g.Spec.Egress {
		hosts[i] = string(h)
		if c, err := plugins.CanonicalEgressHost(hosts[i]); err == nil {
			hosts[i] = c
		}
	}
	secrets := make([]string, len(g.Spec.Secrets))
	for i, sb := range g.Spec.Secrets {
		secrets[i] = sb.Name
		if sb.SecretName != "" && sb.SecretName != sb.Name {
			secrets[i] += " (Secret " + sb.SecretName + ")"
		}
	}
	tiers := make([]string, len(g.Spec.DataTiers))
	for i, t := range g.Spec.DataTiers {
		tiers[i] = string(t)
	}
	s.Items = []Item{
		{Label: "Capabilities", Values: display.Set(caps)},
		{Label: "Egress", Values: display.Set(hosts)},
		{Label: "Secrets", Values: display.Set(secrets)},
		{Label: "Data tiers", Values: display.Set(tiers)},
		{Label: "Pull secrets", Values: display.Set(g.Spec.ImagePullSecrets)},
	}
	if len(g.Spec.OwnerEgress) > 0 {
		own := make([]string, len(g.Spec.OwnerEgress))
		for i, h := range g.Spec.OwnerEgress {
			own[i] = string(h)
			if c, err := plugins.CanonicalEgressHost(own[i]); err == nil {
				own[i] = c
			}
		}
		s.Items = append(s.Items, Item{Label: "Your hosts", Values: display.Set(own)})
	}
	return s
}

func effectiveSection(e *v1alpha1.EffectivePermissions) Section {
	s := Section{ID: "effective", Title: "Effective (what the running version holds: requested and granted)"}
	if e == nil {
		s.Note = "Nothing runs, so nothing is held."
		return s
	}
	secrets := make([]string, len(e.Secrets))
	for i, sm := range e.Secrets {
		secrets[i] = fmt.Sprintf("%s (Secret %s) at %s", sm.Name, sm.SecretName, sm.MountPath)
	}
	caps := make([]string, len(e.Capabilities))
	for i, c := range e.Capabilities {
		caps[i] = string(c)
	}
	s.Items = []Item{
		{Label: "Capabilities", Values: display.Set(caps)},
		{Label: "Egress", Values: display.Set(e.Egress)},
		{Label: "Secrets", Values: display.Set(secrets)},
		{Label: "Data tiers", Values: display.Set(e.DataTiers)},
	}
	return s
}

func deployedSection(p *v1alpha1.Plugin, policy *plugins.TrustPolicy, now time.Time) Section {
	s := Section{ID: "deployed", Title: "Running version (status.deployed)"}
	d := p.Status.Deployed
	if d == nil {
		s.Note = "Nothing runs."
		return s
	}
	if d.Image != p.Spec.Image {
		s.Note = "A previous version: the current spec does not run yet."
	}
	signer := signerCell(d.Signer, policy)
	trustWords := signatureCell(d.Trust)
	s.Items = []Item{
		{Label: "Image", Values: []string{d.Image}},
		{Label: "Trust", Values: []string{trustWords.Text}},
		{Label: "Signer", Values: []string{signer.Text, signer.Detail}},
	}
	if d.VerifiedAt != nil {
		s.Items = append(s.Items, Item{Label: "Verified", Values: []string{
			d.VerifiedAt.UTC().Format(time.RFC3339) + " (" + display.Age(now, d.VerifiedAt.Time) + " ago)"}})
	}
	return s
}

// historySection lists status.history, newest first, one item a
// revision: its image, how it verified, when it first ran, and "running"
// or when it was replaced. Bounded as the CRD bounds it.
func historySection(p *v1alpha1.Plugin, now time.Time) Section {
	s := Section{ID: "history", Title: "History (status.history, newest first)"}
	h := p.Status.History
	if len(h) == 0 {
		s.Note = "No version has run yet."
		return s
	}
	if len(h) > v1alpha1.MaxPluginHistory {
		h = h[:v1alpha1.MaxPluginHistory]
	}
	s.Note = "'openfief plugin rollback " + p.Name + " [--to REVISION]' returns to one of these images, verified again."
	running := ""
	if d := p.Status.Deployed; d != nil {
		running = d.Image
	}
	ago := func(t time.Time) string { return t.UTC().Format(time.RFC3339) + " (" + display.Age(now, t) + " ago)" }
	for i, r := range h {
		trust := strings.TrimSpace(r.Trust + " by " + r.Signer)
		if r.Signer == "" {
			trust = r.Trust
		}
		last := "running"
		switch {
		case i == 0 && r.Image == running:
		case r.LastRan != nil:
			last = "replaced " + ago(r.LastRan.Time)
		default:
			last = "not running"
		}
		s.Items = append(s.Items, Item{Label: "Revision " + strconv.FormatInt(r.Revision, 10),
			Values: nonBlank(r.Image, trust, "first ran "+ago(r.FirstRan.Time), last)})
	}
	return s
}

// nonBlank keeps the values that are not empty.
func nonBlank(values ...string) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// conditions lists Ready, SignatureVerified and ApprovalRequired first, then
// any other by type.
func conditions(p *v1alpha1.Plugin, now time.Time) []Condition {
	conds := slices.Clone(p.Status.Conditions)
	order := map[string]int{v1alpha1.ConditionReady: 0, v1alpha1.ConditionSignatureVerified: 1, v1alpha1.ConditionApprovalRequired: 2}
	rank := func(t string) int {
		if o, ok := order[t]; ok {
			return o
		}
		return len(order)
	}
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int {
		return cmp.Or(cmp.Compare(rank(a.Type), rank(b.Type)), cmp.Compare(a.Type, b.Type))
	})
	out := make([]Condition, 0, len(conds))
	for _, c := range conds {
		out = append(out, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason,
			Age: display.Age(now, c.LastTransitionTime.Time), Message: c.Message})
	}
	return out
}

func capabilities(cs []plugins.Capability) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// nonEmpty keeps the items that have values.
func nonEmpty(items ...Item) []Item {
	var out []Item
	for _, it := range items {
		if len(it.Values) > 0 {
			out = append(out, it)
		}
	}
	return out
}

// prettyJSON indents a JSON document with its keys sorted and its text as
// written: "<" stays "<" rather than the \u003c escape the API server
// sends, since the page shows it as text anyway. Invalid JSON is returned
// as it is.
func prettyJSON(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
