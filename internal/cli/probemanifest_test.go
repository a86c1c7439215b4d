package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestProbeManifestIsTheProbesFile: the manifest compiled into the CLI is
// plugins/check-probe/manifest.json, which the probe image is signed with.
func TestProbeManifestIsTheProbesFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "plugins", "check-probe", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := plugins.ParseManifestLabel(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	got, err := probeManifest()
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(file) {
		t.Errorf("compiled-in probe manifest %+v, want plugins/check-probe/manifest.json %+v (hack/build/plugin-labels.sh write)", got, file)
	}
}

// greedyProbe is a probe label asking for more than the check probe:
// connector and view, the accounts tier, an owner's Secret and another
// host: what a probe image's label could ask for to turn the check into a
// grant.
var greedyProbe = plugins.Manifest{
	Capabilities: []plugins.Capability{plugins.CapabilityConnector, plugins.CapabilityView},
	Egress:       []string{"example.com", "collector.example.net"},
	Secrets:      []plugins.SecretMount{{Name: "ibkr-flex-credentials", MountPath: "/etc/ibkr"}},
	DataTiers:    []string{"accounts"},
}

func TestCheckProbeLabel(t *testing.T) {
	want, err := probeManifest()
	if err != nil {
		t.Fatal(err)
	}
	ref := mustRef(t, testutil.Image("check-probe"))
	reordered := want
	reordered.Egress = append([]string(nil), want.Egress...)
	fewer := want
	fewer.Egress = nil
	cases := map[string]struct {
		signed *plugins.Manifest
		ok     bool
	}{
		"exactly the probe's": {signed: &want, ok: true},
		"the same as a set":   {signed: &reordered, ok: true},
		"asks for more":       {signed: &greedyProbe},
		"asks for less":       {signed: &fewer},
		"no label":            {signed: nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := checkProbeLabel(ref, c.signed, want)
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if ExitCode(err) != ExitManifestMismatch || !strings.Contains(err.Error(), "nothing was created") {
				t.Fatalf("checkProbeLabel = %v (exit %d), want a refusal with exit %d", err, ExitCode(err), ExitManifestMismatch)
			}
		})
	}
}

func TestChooseProbeImage(t *testing.T) {
	pinned := mustRef(t, "ghcr.io/arkadiuss/openfief/check-probe@"+testutil.Digest("pinned"))
	mirror := "registry.lan/mirror/check-probe@" + pinned.Digest()
	other := "ghcr.io/arkadiuss/openfief/check-probe@" + testutil.Digest("other")
	cases := map[string]struct {
		flag   string
		pinned plugins.ImageRef
		want   string
		code   int
	}{
		"release, no flag":           {pinned: pinned, want: pinned.String()},
		"release, the pinned digest": {flag: pinned.String(), pinned: pinned, want: pinned.String()},
		"release, a mirror":          {flag: mirror, pinned: pinned, want: mirror},
		"release, another digest":    {flag: other, pinned: pinned, code: ExitInvalidImage},
		"dev build, no flag":         {code: ExitUsage},
		"dev build, a flag":          {flag: other, want: other},
		"dev build, a tag":           {flag: "ghcr.io/x/check-probe:latest", code: ExitInvalidImage},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := chooseProbeImage(c.flag, c.pinned, "v1.2.0")
			if c.code != 0 {
				if ExitCode(err) != c.code {
					t.Fatalf("chooseProbeImage = %v, %v (exit %d), want exit %d", got, err, ExitCode(err), c.code)
				}
				return
			}
			if err != nil || got.String() != c.want {
				t.Fatalf("chooseProbeImage = %v, %v, want %s", got, err, c.want)
			}
		})
	}
}

func mustRef(t *testing.T, s string) plugins.ImageRef {
	t.Helper()
	ref, err := plugins.ParseImageRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
