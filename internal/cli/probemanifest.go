package cli

import (
	"github.com/arkadiuss/openfief/internal/check/probewire"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

// What `openfief check --isolation` runs and grants is fixed when the CLI
// is built, never read from the cluster or from the probe image (OF-29): the
// probe manifest compiled in from plugins/check-probe/manifest.json
// (probewire.ProbeManifest) and, in a release's CLI, the probe image that
// release built and signed (catalog.CheckProbe). The probe image's own
// label is only compared with the compiled-in manifest; the Plugin and the
// PluginGrant the check writes are computed from the compiled-in one.

// probeManifest is the check probe's manifest this CLI was built with.
func probeManifest() (plugins.Manifest, error) {
	m, err := plugins.ParseManifestLabel(probewire.ProbeManifest)
	if err != nil {
		return plugins.Manifest{}, exitf(ExitFailure, "the probe manifest built into this CLI: %w", err)
	}
	return m, nil
}

// probeImageFor is the probe image the check runs: the one this CLI's
// release pins, or --probe-image (flag). A release's CLI accepts
// --probe-image only with the pinned digest (the same image in another
// repository, such as a mirror); a development build pins none, so
// --probe-image is required. No ConfigMap is read: whoever may write one
// must not choose what the check installs.
func probeImageFor(flag string) (plugins.ImageRef, error) {
	pinned, ok, err := catalog.CheckProbe()
	if err != nil {
		return plugins.ImageRef{}, exitf(ExitFailure, "%w", err)
	}
	if !ok {
		pinned = plugins.ImageRef{}
	}
	return chooseProbeImage(flag, pinned, catalog.Version())
}

// chooseProbeImage is probeImageFor's decision: pinned is the release's
// probe (zero in a development build), version the release's.
func chooseProbeImage(flag string, pinned plugins.ImageRef, version string) (plugins.ImageRef, error) {
	if flag == "" {
		if pinned.IsZero() {
			return plugins.ImageRef{}, exitf(ExitUsage, "no probe image: this CLI is not a release's build, so it pins none; give --probe-image, the check probe built from the same tree as this CLI (plugins/check-probe)")
		}
		return pinned, nil
	}
	ref, err := parseImage("--probe-image", flag)
	if err != nil {
		return plugins.ImageRef{}, err
	}
	if !pinned.IsZero() && ref.Digest() != pinned.Digest() {
		return plugins.ImageRef{}, exitf(ExitInvalidImage, "--probe-image %s: this CLI's release %s pins the check probe %s; only that digest is run (from its repository or a mirror)",
			display.Text(ref.String()), display.Text(orDash(version)), pinned.String())
	}
	return ref, nil
}

// checkProbeLabel refuses a probe image whose signed label is not exactly
// the probe manifest want: the check approves a probe for what this CLI's
// probe asks, and an image asking for anything else is not that probe.
func checkProbeLabel(ref plugins.ImageRef, signed *plugins.Manifest, want plugins.Manifest) error {
	if signed != nil && signed.Equal(want) {
		return nil
	}
	got := "no manifest label"
	if signed != nil {
		got = asksFor(*signed)
	}
	return exitf(ExitManifestMismatch, "the probe image %s is signed with a manifest label that asks for %s, not exactly what this CLI's check probe asks for (%s): refused, nothing was created",
		shortImage(ref.String()), got, asksFor(want))
}

// probeAsks says in a few words what the compiled-in probe manifest asks
// for, for the help text.
func probeAsks() string {
	m, err := probeManifest()
	if err != nil {
		return "(invalid: " + err.Error() + ")"
	}
	return asksFor(m)
}
