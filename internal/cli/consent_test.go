package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/vt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	imagetrust "github.com/arkadiuss/openfief/internal/trust"
)

// The consent property (OF-17): whatever a signed manifest holds,
// every screen that asks for or reports the owner's consent shows every
// capability, egress host and Secret slot it requests, once the bytes the
// CLI writes have been interpreted by a terminal. The terminal is an
// emulator (charmbracelet/x/vt) that moves the cursor, erases, returns the
// carriage and saves and restores the cursor as a real one does.

// screenWidth and screenHeight are the emulated terminal's size: wide and
// tall enough that nothing the generators make wraps or scrolls away.
const (
	screenWidth  = 300
	screenHeight = 80
)

// terminal is the one emulator the tests share: making one allocates a
// few megabytes, too slow for a fuzz target that renders six screens per
// input. screen resets it before each use.
var terminal struct {
	sync.Mutex
	emu *vt.Emulator
}

// screen returns what a terminal shows after it is sent out, with a tty's
// output processing (newline sent as CR LF).
func screen(t testing.TB, out string) string {
	t.Helper()
	terminal.Lock()
	defer terminal.Unlock()
	if terminal.emu == nil {
		terminal.emu = vt.NewEmulator(screenWidth, screenHeight)
		// The emulator answers queries (device attributes, cursor
		// position) on its input pipe; drain it so a hostile query cannot
		// block the write.
		go func(e *vt.Emulator) { _, _ = io.Copy(io.Discard, e) }(terminal.emu)
	}
	// CAN ends any sequence a previous output left open; RIS resets the
	// terminal to its initial state: an empty screen, the cursor home.
	reset := "\x18\x1bc"
	if _, err := terminal.emu.Write([]byte(reset + strings.ReplaceAll(out, "\n", "\r\n"))); err != nil {
		t.Fatal(err)
	}
	return terminal.emu.String()
}

// consentScreens renders the four outputs that show what a plugin asks for,
// as the commands render them, for the manifest m and no grant yet:
// approve's prompt, install's report, status and verify. Each is keyed by
// the command and holds the sections that must list everything requested.
func consentScreens(t testing.TB, m plugins.Manifest) map[string][]string {
	t.Helper()
	const name = "fx"
	image := "registry.example/plugins/fx@sha256:" + strings.Repeat("ab", 32)
	out := map[string][]string{}

	a, err := plugins.Approve(name, m, nil, plugins.Selection{})
	if err != nil {
		// A manifest that bypassed validation may make a grant Approve
		// refuses; the prompt is then shown for everything pending.
		a = plugins.Approval{Pending: plugins.NeedsApproval(m, nil)}
		a.Approved = a.Pending
		for _, s := range m.Secrets {
			a.Secrets = append(a.Secrets, plugins.SecretBinding{Slot: s.Name, SecretName: s.Name, MountPath: s.MountPath})
		}
	}
	var b bytes.Buffer
	printApprovalPrompt(&b, name, image, a, m)
	s := screen(t, b.String())
	pending, approves, ok := strings.Cut(s, "This approves:")
	if !ok {
		t.Fatalf("approve: no \"This approves:\" on the screen:\n%s", s)
	}
	out["approve pending"] = []string{pending}
	out["approve this approves"] = []string{approves}

	b.Reset()
	printWritten(&b, imagetrust.Verification{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedByTrustedSigner, Signer: "owner"}, m, nil, "openfief plugin approve fx")
	out["install"] = []string{screen(t, b.String())}

	b.Reset()
	p := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}, Spec: v1alpha1.PluginSpec{Image: image, Manifest: apiconv.ManifestToAPI(m)}}
	printStatus(&b, time.Unix(0, 0), p, nil, func(n string) string { return "openfief plugin approve " + n })
	s = screen(t, b.String())
	requested, rest, ok := strings.Cut(s, "Granted:")
	_, pendingPart, ok2 := strings.Cut(rest, "Pending (")
	if !ok || !ok2 {
		t.Fatalf("status: no Granted or Pending section on the screen:\n%s", s)
	}
	out["status requested"] = []string{requested}
	out["status pending"] = []string{pendingPart}

	b.Reset()
	policy, err := imagetrust.NewPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := plugins.ParseImageRef(image)
	if err != nil {
		t.Fatal(err)
	}
	mm := m
	printCheck(&b, imageCheck{Ref: ref, Verification: imagetrust.Verification{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedByTrustedSigner, Message: "signed", Signer: "openfief-ci"}, Manifest: &mm}, trust{policy: policy, source: "test"})
	out["verify"] = []string{screen(t, b.String())}
	return out
}

// requested lists what m asks for as a person must see it: capabilities,
// egress hosts in canonical form, Secret slots with their mount paths, data
// tiers, each as internal/display shows it.
func requested(m plugins.Manifest) []string {
	var want []string
	for _, c := range m.Capabilities {
		want = append(want, display.Text(string(c)))
	}
	for _, h := range m.Egress {
		if c, err := plugins.CanonicalEgressHost(h); err == nil {
			h = c
		}
		want = append(want, display.Text(h))
	}
	for _, s := range m.Secrets {
		want = append(want, slotAt(s.Name, s.MountPath))
	}
	for _, d := range m.DataTiers {
		want = append(want, display.Text(d))
	}
	return want
}

// checkConsent asserts the consent property for m: every screen shows
// everything m requests.
func checkConsent(t testing.TB, m plugins.Manifest) {
	t.Helper()
	checkShown(t, m, requested(m))
}

// checkShown asserts that every screen rendered for m shows each of want.
func checkShown(t testing.TB, m plugins.Manifest, want []string) {
	t.Helper()
	for cmd, sections := range consentScreens(t, m) {
		for _, sec := range sections {
			for _, w := range want {
				if !strings.Contains(sec, w) {
					t.Errorf("%s: the screen does not show %q:\n%s", cmd, w, sec)
				}
			}
		}
	}
}

// attackPath is a mount path that hides a line of the prompt: save the
// cursor, move it up a line, erase that line (the Egress line above) and
// restore the cursor.
const attackPath = "/etc/x\x1b7\x1b[1A\x1b[2K\x1b8"

// attackManifest asks for an egress host that the attack erases.
func attackManifest() plugins.Manifest {
	return plugins.Manifest{
		Capabilities: []plugins.Capability{plugins.CapabilityConnector},
		Egress:       []string{"exfil.example.com"},
		Secrets:      []plugins.SecretMount{{Name: "creds", MountPath: attackPath}},
	}
}

// TestConsentAttackMountPath is a regression test: a mount path with
// cursor-moving escapes must not erase the Egress line of the approval prompt
// (nor of install, status and verify).
func TestConsentAttackMountPath(t *testing.T) {
	m := attackManifest()
	// The first line: validation refuses the text.
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "manifest.secrets[0].mountPath: unsafe text") {
		t.Errorf("Validate() = %v, want the mount path refused as unsafe text", err)
	}
	// The second line, alone: rendered anyway, the screen shows the host.
	checkConsent(t, m)
	for cmd, sections := range consentScreens(t, m) {
		for _, sec := range sections {
			if !strings.Contains(sec, "exfil.example.com:443") {
				t.Errorf("%s: the egress host was erased:\n%s", cmd, sec)
			}
			if !strings.Contains(sec, `/etc/x\x1b7\x1b[1A\x1b[2K\x1b8`) {
				t.Errorf("%s: the mount path is not shown escaped:\n%s", cmd, sec)
			}
		}
	}
}

// hostile are strings that act on a terminal or reorder text.
var hostile = []string{
	attackPath,
	"\r                                        \r",
	"\x1b[2J\x1b[H",                // clear the screen, cursor home
	"\x1b[3A\x1b[0J",               // up three, erase to the end of the screen
	"\u009b1A\u009b2K",             // the same in C1 (8-bit CSI)
	"x\u202emoc.elpmaxe\u202c",     // right-to-left override
	"\u2066a\u2069\u200f\u061c",    // isolates and marks
	"a\nEgress:        none\nb",    // a forged line
	"\x08\x08\x08\x08\x08\x08\x7f", // backspaces and DEL
	"\x1b]0;title\x07\x1bP\x1b\\",  // OSC and DCS
	"\xff\xfe\xc3",                 // invalid UTF-8
	"\x1b[c\x1b[6n",                // queries the terminal answers
	strings.Repeat("\x1b[1A", 300), // many lines up
	"a\u2028b\u2029c",              // line and paragraph separators
}

// TestConsentHostileFields renders manifests with hostile text in every
// field, bypassing validation: the second line must hold on its own. The
// screens show every legitimate request, and nothing the CLI writes
// carries a control or bidi character other than its own newlines.
func TestConsentHostileFields(t *testing.T) {
	for i, h := range hostile {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			for _, m := range hostileManifests(h) {
				// The legitimate requests beside the hostile one.
				checkShown(t, m, []string{"connector", "exfil.example.com:443", "api.nbp.pl:443", "creds at /etc/creds", "accounts"})
				checkRawOutput(t, m)
			}
		})
	}
}

// hostileManifests puts h into each field of a manifest in turn, beside
// legitimate requests.
func hostileManifests(h string) []plugins.Manifest {
	base := func() plugins.Manifest {
		return plugins.Manifest{
			Capabilities: []plugins.Capability{plugins.CapabilityConnector},
			Egress:       []string{"exfil.example.com", "api.nbp.pl"},
			Secrets:      []plugins.SecretMount{{Name: "creds", MountPath: "/etc/creds"}},
			DataTiers:    []string{"accounts"},
		}
	}
	var out []plugins.Manifest
	m := base()
	m.Capabilities = append(m.Capabilities, plugins.Capability(h))
	out = append(out, m)
	m = base()
	m.Egress = append(m.Egress, h)
	out = append(out, m)
	m = base()
	m.Secrets = append(m.Secrets, plugins.SecretMount{Name: h, MountPath: "/etc/other"})
	out = append(out, m)
	m = base()
	m.Secrets = append(m.Secrets, plugins.SecretMount{Name: "other", MountPath: "/etc/o" + h})
	out = append(out, m)
	m = base()
	m.DataTiers = append(m.DataTiers, h)
	out = append(out, m)
	m = base()
	schema, _ := json.Marshal(map[string]any{"title": h, "description": h, "properties": map[string]any{h: map[string]any{"type": "string"}}})
	m.ConfigSchema = schema
	out = append(out, m)
	m = base()
	m.ConfigSchema = json.RawMessage(h) // not JSON at all: shown as written
	out = append(out, m)
	return out
}

// checkRawOutput asserts that the bytes written for m are valid UTF-8 with
// no unsafe rune but the CLI's own newlines.
func checkRawOutput(t testing.TB, m plugins.Manifest) {
	t.Helper()
	var b bytes.Buffer
	a := plugins.Approval{Pending: plugins.NeedsApproval(m, nil)}
	a.Approved = a.Pending
	printApprovalPrompt(&b, "fx", "r.example/fx@sha256:"+strings.Repeat("ab", 32), a, m)
	printWritten(&b, imagetrust.Verification{Status: metav1.ConditionTrue, Reason: "x"}, m, nil, "approve")
	printManifest(&b, "  ", m)
	out := b.String()
	if !utf8.ValidString(out) {
		t.Fatalf("output is not valid UTF-8: %q", out)
	}
	for _, r := range out {
		if r != '\n' && plugins.IsUnsafeRune(r) {
			t.Fatalf("output holds %U: %q", r, out)
		}
	}
}

// TestConsentStatusHostileStatus puts hostile text where the operator and
// the core write (conditions, status.effective, status.deployed, the core's
// last error): status must still show every request and escape the rest.
func TestConsentStatusHostileStatus(t *testing.T) {
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"exfil.example.com"}}
	for _, h := range hostile {
		p := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: "fx"}, Spec: v1alpha1.PluginSpec{Image: "r.example/fx@sha256:" + strings.Repeat("ab", 32) + h, Manifest: apiconv.ManifestToAPI(m)}}
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "X" + h, Message: h}, {Type: h, Status: metav1.ConditionStatus(h), Reason: h, Message: h}}
		p.Status.Deployed = &v1alpha1.DeployedVersion{Image: h, Signer: h, Trust: h}
		p.Status.Effective = &v1alpha1.EffectivePermissions{Egress: []string{h}, Secrets: []v1alpha1.GrantedSecret{{Name: h, SecretName: h, MountPath: h}}, DataTiers: []string{h}}
		g := &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: "fx"}, Spec: v1alpha1.PluginGrantSpec{Egress: []v1alpha1.EgressHost{v1alpha1.EgressHost(h)}, Secrets: []v1alpha1.SecretGrant{{Name: h, SecretName: h}}, DataTiers: []v1alpha1.DataTier{v1alpha1.DataTier(h)}, ImagePullSecrets: []string{h}}}
		var b bytes.Buffer
		printStatus(&b, time.Unix(0, 0), p, g, func(n string) string { return "approve " + n })
		printCoreStatus(&b, time.Unix(0, 0), coreStatusWithError(h), nil)
		out := b.String()
		for _, r := range out {
			if r != '\n' && plugins.IsUnsafeRune(r) {
				t.Fatalf("status output holds %U: %q", r, out)
			}
		}
		if s := screen(t, out); strings.Count(s, "exfil.example.com:443") < 2 {
			t.Errorf("status does not show the requested and pending host:\n%s", s)
		}
	}
}

// coreStatusWithError is what the core reports of a failed sync whose
// plugin wrote msg as its error.
func coreStatusWithError(msg string) ownerapi.InstanceStatus {
	last := time.Unix(0, 0)
	return ownerapi.InstanceStatus{Plugin: "fx", Scheduled: true, LastSync: &last, LastError: msg}
}

// FuzzConsent generates manifests from the fuzzer's strings, keeps those
// validation accepts, and checks the consent property on each. Its seeds
// run in every `go test`.
func FuzzConsent(f *testing.F) {
	f.Add(uint8(1), "api.nbp.pl", "static.nbp.pl:8443", "creds", "/etc/openfief/creds", "accounts", "nbp-fx config")
	f.Add(uint8(3), "exfil.example.com", "xn--bcher-kva.example", "a.b-c", "/opt/x y/z", "fx_rates", "zażółć ☃")
	f.Add(uint8(2), "a.example:1", "b.example:65535", "s", "/srv/\u00e9t\u00e9", "T-1", "")
	f.Add(uint8(1), "exfil.example.com", "api.nbp.pl", "creds", attackPath, "x", "\x1b[2K")
	f.Fuzz(func(t *testing.T, caps uint8, host1, host2, secret, mountPath, tier, title string) {
		m := plugins.Manifest{}
		if caps&1 != 0 {
			m.Capabilities = append(m.Capabilities, plugins.CapabilityConnector)
		}
		if caps&2 != 0 {
			m.Capabilities = append(m.Capabilities, plugins.CapabilityView)
		}
		for _, h := range []string{host1, host2} {
			if h != "" {
				m.Egress = append(m.Egress, h)
			}
		}
		if secret != "" || mountPath != "" {
			m.Secrets = []plugins.SecretMount{{Name: secret, MountPath: mountPath}}
		}
		if tier != "" {
			m.DataTiers = []string{tier}
		}
		if title != "" {
			m.ConfigSchema, _ = json.Marshal(map[string]string{"title": title})
		}
		if m.Validate() != nil {
			// Only what validation accepts is a manifest the cluster can
			// hold; TestConsentHostileFields covers the rest.
			return
		}
		for _, s := range requested(m) {
			if utf8.RuneCountInString(s) > 60 {
				return // longer than a screen line: bounded, not listed whole
			}
		}
		checkConsent(t, m)
	})
}

// TestConsentOwnerSlots checks every screen that shows a manifest tells the
// owner about its slots for hosts of their choosing (OF-36), which the
// vendor asks for without naming a host.
func TestConsentOwnerSlots(t *testing.T) {
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityView}, OwnerEgress: 2}
	want := map[string]string{
		"approve this approves": "It may also reach 2 more host(s) of your choosing; name one with --host.",
		"install":               "It may also reach 2 host(s) of your choosing, such as your own server; add one with: openfief plugin approve fx --host HOST",
		"status requested":      "Your hosts:    up to 2 of your choosing",
		"verify":                "Your hosts:    up to 2 of your choosing",
	}
	screens := consentScreens(t, m)
	for cmd, w := range want {
		if secs := screens[cmd]; len(secs) == 0 || !strings.Contains(strings.Join(secs, "\n"), w) {
			t.Errorf("%s: the screen does not show %q:\n%s", cmd, w, strings.Join(secs, "\n"))
		}
	}
}
