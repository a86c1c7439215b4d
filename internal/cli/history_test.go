package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
)

// historyPlugin is a Plugin whose status.history holds revisions 5 down to
// 3 (5 runs), as the operator writes it.
func historyPlugin(t0 time.Time) *v1alpha1.Plugin {
	img := func(hex string) string { return "ghcr.io/example/nbp-fx@sha256:" + strings.Repeat(hex, 64) }
	at := func(h int) *metav1.Time { return &metav1.Time{Time: t0.Add(time.Duration(h) * time.Hour)} }
	p := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: "fx", Namespace: "openfief"}}
	p.Spec.Image = img("c")
	p.Status.Deployed = &v1alpha1.DeployedVersion{Image: img("c")}
	p.Status.History = []v1alpha1.PluginRevision{
		{Revision: 5, Image: img("c"), ManifestDigest: "sha256:" + strings.Repeat("1", 64), Signer: "owner", Trust: "SignedByTrustedSigner", FirstRan: *at(2)},
		{Revision: 4, Image: img("b"), Signer: "acme", Trust: "Verified", FirstRan: *at(1), LastRan: at(2)},
		{Revision: 3, Image: img("a"), FirstRan: *at(0), LastRan: at(1)},
	}
	return p
}

func TestPrintHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := printHistory(&b, t0.Add(3*time.Hour), historyOf(historyPlugin(t0))); err != nil {
		t.Fatal(err)
	}
	want := `REVISION   IMAGE                                        SIGNATURE                        FIRST RAN                         LAST RAN
5          ghcr.io/example/nbp-fx@sha256:cccccccccccc   SignedByTrustedSigner by owner   2026-12-06T11:00:00Z (60m ago)    running
4          ghcr.io/example/nbp-fx@sha256:bbbbbbbbbbbb   Verified by acme                 2026-12-06T10:00:00Z (120m ago)   2026-12-06T11:00:00Z (60m ago)
3          ghcr.io/example/nbp-fx@sha256:aaaaaaaaaaaa   -                                2026-12-06T09:00:00Z (3h ago)     2026-12-06T10:00:00Z (120m ago)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

func TestHistoryJSON(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := printObject(&b, outputJSON, historyOf(historyPlugin(t0))); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Name    string `json:"name"`
		Running string `json:"running"`
		Items   []struct {
			Revision       int64      `json:"revision"`
			Image          string     `json:"image"`
			ManifestDigest string     `json:"manifestDigest"`
			FirstRan       time.Time  `json:"firstRan"`
			LastRan        *time.Time `json:"lastRan"`
			Running        bool       `json:"running"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if doc.Name != "fx" || len(doc.Items) != 3 || doc.Items[0].Revision != 5 || !doc.Items[0].Running || doc.Items[1].Running ||
		doc.Items[0].LastRan != nil || doc.Items[1].LastRan == nil || doc.Items[0].ManifestDigest == "" || doc.Running != doc.Items[0].Image {
		t.Errorf("history -o json:\n%s", b.String())
	}

	empty := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	b.Reset()
	if err := printObject(&b, outputJSON, historyOf(empty)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"items": []`) {
		t.Errorf("an empty history is not an empty list:\n%s", b.String())
	}
}

// TestPrintHistoryEscapes: whoever may write plugins/status writes the
// history; its text is shown escaped and bounded.
func TestPrintHistoryEscapes(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	p := historyPlugin(t0)
	p.Status.History[1].Image = "evil\x1b[2J.example/x@sha256:" + strings.Repeat("d", 64)
	p.Status.History[1].Signer = "acme\u202e\ttab" + strings.Repeat("x", 200)
	var b bytes.Buffer
	if err := printHistory(&b, t0, historyOf(p)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\u202e") || strings.Contains(out, "\ttab") {
		t.Errorf("raw control text printed:\n%q", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 400 {
			t.Errorf("a line of %d bytes: %q", len(line), line)
		}
	}
}

// TestPickRevision: the previous revision by default, the one --to names,
// and errors that name --to and the revisions there are.
func TestPickRevision(t *testing.T) {
	p := historyPlugin(time.Unix(0, 0))
	for name, tc := range map[string]struct {
		plugin *v1alpha1.Plugin
		to     int64
		want   int64
		code   int
		msg    []string
	}{
		"the previous": {plugin: p, want: 4},
		"while an upgrade waits, the one that runs": {plugin: func() *v1alpha1.Plugin {
			q := p.DeepCopy()
			q.Spec.Image = "ghcr.io/example/nbp-fx@sha256:" + strings.Repeat("e", 64)
			return q
		}(), want: 5},
		"--to 3":           {plugin: p, to: 3, want: 3},
		"--to the newest":  {plugin: p, to: 5, want: 5},
		"--to 2, dropped":  {plugin: p, to: 2, code: ExitNotFound, msg: []string{"--to 2: plugin fx has no revision 2", "revisions 5, 4, 3", "openfief plugin history fx"}},
		"--to 9, unknown":  {plugin: p, to: 9, code: ExitNotFound, msg: []string{"--to 9", "revisions 5, 4, 3"}},
		"no previous":      {plugin: &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Spec: p.Spec, Status: v1alpha1.PluginStatus{History: p.Status.History[:1]}}, code: ExitNotFound, msg: []string{"no previous revision", "only revision 5"}},
		"an empty history": {plugin: &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: "none"}}, to: 1, code: ExitNotFound, msg: []string{"--to 1", "history is empty"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := pickRevision(tc.plugin, tc.to)
			if code := ExitCode(err); code != tc.code {
				t.Fatalf("exit code %d, want %d (error: %v)", code, tc.code, err)
			}
			if err == nil && got.Revision != tc.want {
				t.Errorf("revision %d, want %d", got.Revision, tc.want)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not hold %q", err, m)
				}
			}
		})
	}
}
