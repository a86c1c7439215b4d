package dashboard

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// hostileText moves a terminal's cursor, erases a line, overrides the
// direction of text, forges a line and holds invalid UTF-8.
const hostileText = "x\x1b7\x1b[1A\x1b[2K\x1b8\u202emoc.elpmaxe\u202c\u2066\u009b2K\r\nEgress: none\xff"

// TestViewEscapesOutsideText (OF-17): a Plugin, its grant and its status
// with hostile text in every string the dashboard shows yield a table and a
// page (the data of the templates) with
// no control or bidi character anywhere, but the page's own line breaks in
// a config schema and the approval question; and the requested host still
// shows.
func TestViewEscapesOutsideText(t *testing.T) {
	s := hostileSnapshot(t)
	tbl, d := s.table(), s.detail("fx")
	if d.Approve == nil {
		t.Fatal("no approval offered: the test would not cover the question")
	}
	checkStrings(t, "table", reflect.ValueOf(tbl), false)
	checkStrings(t, "detail", reflect.ValueOf(d), false)
	if !strings.Contains(mustJSON(t, d), "exfil.example.com:443") {
		t.Errorf("the page does not show the requested host exfil.example.com:443")
	}
	if want := `x\x1b7\x1b[1A\x1b[2K\x1b8\u202emoc.elpmaxe\u202c`; !strings.Contains(d.Conditions[0].Message, want) {
		t.Errorf("condition message %q, want it to show %q", d.Conditions[0].Message, want)
	}
	gone := s.detail("nope" + hostileText)
	checkStrings(t, "gone", reflect.ValueOf(gone), false)
	if gone.Removed == nil || len(tbl.Removed.Entries) != 2 {
		t.Fatal("the removed data is not shown: the test would not cover it")
	}
	checkStrings(t, "removed", reflect.ValueOf(s.removedPage("fx~"+hostileText)), false)
}

// checkStrings walks v and fails on any string that is not valid UTF-8 or
// holds an unsafe rune; newlines are allowed only where lines is set (a
// preformatted value, the approval question).
func checkStrings(t *testing.T, path string, v reflect.Value, lines bool) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if lines {
			s = strings.ReplaceAll(s, "\n", "")
		}
		if err := plugins.CheckText(s, 0); err != nil {
			t.Errorf("%s = %q: %v", path, v.String(), err)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			checkStrings(t, path, v.Elem(), lines)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			checkStrings(t, path+"[]", v.Index(i), lines)
		}
	case reflect.Struct:
		pre := false
		if f := v.FieldByName("Pre"); f.IsValid() && f.Kind() == reflect.Bool {
			pre = f.Bool()
		}
		for i := 0; i < v.NumField(); i++ {
			name := v.Type().Field(i).Name
			checkStrings(t, path+"."+name, v.Field(i), pre || name == "Question")
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hostileMarkup is what a careless page would run: an image whose error
// handler and a script that set window.__xss.
const hostileMarkup = `<img src=x onerror="window.__xss=2"><script>window.__xss=1</script>`

// hostileSnapshot is a Plugin named fx, its grant and its status with
// hostileText in every string the dashboard shows, and hostileMarkup in its
// config schema; the approve command and the Approve button are on.
func hostileSnapshot(t *testing.T) snapshot {
	t.Helper()
	h := hostileText
	schema, _ := json.Marshal(map[string]any{"title": h, "description": hostileMarkup + h, "properties": map[string]any{h: map[string]any{"type": "string"}}})
	p := v1alpha1.Plugin{
		ObjectMeta: metav1.ObjectMeta{Name: "fx", Namespace: "openfief", Generation: 1, ResourceVersion: h},
		Spec: v1alpha1.PluginSpec{Image: "r.example/fx" + h + "@sha256:" + strings.Repeat("ab", 32), Manifest: v1alpha1.Manifest{
			Capabilities: []v1alpha1.Capability{v1alpha1.Capability(h), "connector"},
			Egress:       []v1alpha1.EgressHost{"exfil.example.com", v1alpha1.EgressHost(h)},
			Secrets:      []v1alpha1.SecretMount{{Name: h, MountPath: "/etc/" + h}, {Name: "creds", MountPath: "/etc/creds" + h}},
			DataTiers:    []v1alpha1.DataTier{v1alpha1.DataTier(h)},
			ConfigSchema: &apiextensionsv1.JSON{Raw: schema},
		}},
		Status: v1alpha1.PluginStatus{
			ObservedGeneration: 1,
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: h, Message: h},
				{Type: v1alpha1.ConditionSignatureVerified, Status: metav1.ConditionTrue, Reason: h, Message: h},
				{Type: h, Status: metav1.ConditionStatus(h), Reason: h, Message: h},
			},
			Deployed: &v1alpha1.DeployedVersion{Image: h, Signer: h, Trust: h},
			History: []v1alpha1.PluginRevision{
				{Revision: 2, Image: h, ManifestDigest: h, Signer: h, Trust: h},
				{Revision: 1, Image: h + "@sha256:" + strings.Repeat("cd", 32), Signer: h, LastRan: &metav1.Time{}},
			},
			Effective: &v1alpha1.EffectivePermissions{Capabilities: []v1alpha1.Capability{v1alpha1.Capability(h)}, Egress: []string{h}, Secrets: []v1alpha1.GrantedSecret{{Name: h, SecretName: h, MountPath: h}}, DataTiers: []string{h}},
		},
	}
	g := &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: "fx", ResourceVersion: h}, Spec: v1alpha1.PluginGrantSpec{
		Capabilities: []v1alpha1.Capability{v1alpha1.Capability(h)}, Egress: []v1alpha1.EgressHost{v1alpha1.EgressHost(h)},
		Secrets: []v1alpha1.SecretGrant{{Name: h, SecretName: h}}, DataTiers: []v1alpha1.DataTier{v1alpha1.DataTier(h)}, ImagePullSecrets: []string{h},
	}}
	// What the core answers of fx, and data it keeps of removed instances
	// of fx and of a name made of hostile text: every string a plugin (or a
	// core not to be trusted) could have written holds it.
	at := time.Unix(0, 0)
	core := coreState{configured: true, answered: true, statuses: []ownerapi.InstanceStatus{
		{Plugin: "fx", Instance: "fx", Scheduled: true, LastSync: &at, LastError: h + hostileMarkup, NextSync: &at, Watermark: h, RowsTotal: 3},
		{Plugin: "fx", Instance: "fx~" + h, Removed: true, RemovedAt: &at, RowsTotal: 2},
		{Plugin: "nope" + h, Instance: "nope" + h + "~0a1b2c3d", Removed: true},
	}}
	return snapshot{namespace: "openfief" + h, plugins: []v1alpha1.Plugin{p}, grants: map[string]*v1alpha1.PluginGrant{"fx": g},
		now: time.Unix(0, 0), approve: func(n string) string { return "openfief plugin approve " + n + h }, canApprove: true,
		core: core, purge: func(k string) string { return "openfief plugin purge-data " + k + h }}
}
