package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// Bounds of a config schema as shown: each line, and how many lines. A
// line holds a key and a string of at most plugins.MaxSchemaText bytes
// each, so a valid schema is never cut; the bounds stop only a hostile one.
const (
	schemaLineMax  = 3*plugins.MaxSchemaText + 256
	schemaLinesMax = 2000
)

// printManifest writes a manifest as labelled lines, egress hosts in their
// canonical host:port form and the config schema indented. Every value is
// the vendor's text and goes through internal/display (OF-17).
func printManifest(w io.Writer, indent string, m plugins.Manifest) {
	caps := make([]string, len(m.Capabilities))
	for i, c := range m.Capabilities {
		caps[i] = display.Text(string(c))
	}
	secrets := make([]string, len(m.Secrets))
	for i, s := range m.Secrets {
		secrets[i] = slotAt(s.Name, s.MountPath)
	}
	fmt.Fprintf(w, "%sCapabilities:  %s\n", indent, strings.Join(display.Set(caps), ", "))
	fmt.Fprintf(w, "%sEgress:        %s\n", indent, display.Join(display.Set(canonical(m.Egress)), ", "))
	fmt.Fprintf(w, "%sSecrets:       %s\n", indent, strings.Join(display.Set(secrets), ", "))
	fmt.Fprintf(w, "%sData tiers:    %s\n", indent, display.Join(display.Set(m.DataTiers), ", "))
	if m.OwnerEgress != 0 {
		fmt.Fprintf(w, "%sYour hosts:    %s\n", indent, display.OwnerSlots(m.OwnerSlots()))
	}
	if !m.Resources.IsZero() {
		fmt.Fprintf(w, "%sResources:     %s (%s)\n", indent, display.Text(m.Resources.String()), defaultsText())
	}
	if len(bytes.TrimSpace(m.ConfigSchema)) == 0 {
		fmt.Fprintf(w, "%sConfig schema: none (any config object)\n", indent)
		return
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, m.ConfigSchema, indent+"  ", "  "); err != nil {
		fmt.Fprintf(w, "%sConfig schema: %s\n", indent, display.Text(string(m.ConfigSchema)))
		return
	}
	fmt.Fprintf(w, "%sConfig schema:\n%s  %s\n", indent, indent, display.Lines(buf.String(), schemaLineMax, schemaLinesMax))
}

// defaultsText names the resources every plugin gets without asking.
func defaultsText() string {
	return "the defaults are " + plugins.DefaultResourceLimits().String()
}

// warnOwnerHosts warns when the hosts of the owner's choosing a grant holds
// outnumber m's slots: then the version with m does not run until the owner
// removes some (OF-36).
func warnOwnerHosts(w io.Writer, indent string, m plugins.Manifest, g *plugins.Grant) {
	if own, slots := plugins.OwnerHosts(m, g), m.OwnerSlots(); len(own) > slots {
		fmt.Fprintf(w, "%sWarning: the grant lists %d hosts of your choosing and the manifest allows %d; this version does not run until you remove %d from the grant's ownerEgress.\n",
			indent, len(own), slots, len(own)-slots)
	}
}

// slotAt shows a Secret slot and where it is mounted.
func slotAt(name, mountPath string) string {
	return display.Text(name) + " at " + display.Text(mountPath)
}

// canonical returns egress hosts in canonical host:port form; a host that
// does not canonicalise is shown as written.
func canonical(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if c, err := plugins.CanonicalEgressHost(h); err == nil {
			h = c
		}
		out = append(out, h)
	}
	return out
}

// describePending lists what waits for approval, one kind per line, with
// where each Secret slot would be mounted; every value through
// internal/display.
func describePending(w io.Writer, indent string, p plugins.Pending, m plugins.Manifest) {
	if len(p.Capabilities) > 0 {
		caps := make([]string, len(p.Capabilities))
		for i, c := range p.Capabilities {
			caps[i] = string(c)
		}
		fmt.Fprintf(w, "%sCapabilities:  %s\n", indent, display.Join(caps, ", "))
	}
	if len(p.Egress) > 0 {
		fmt.Fprintf(w, "%sEgress:        %s\n", indent, display.Join(p.Egress, ", "))
	}
	if len(p.Secrets) > 0 {
		mounts := map[string]string{}
		for _, s := range m.Secrets {
			mounts[s.Name] = s.MountPath
		}
		parts := make([]string, len(p.Secrets))
		for i, s := range p.Secrets {
			parts[i] = slotAt(s, mounts[s])
		}
		fmt.Fprintf(w, "%sSecrets:       %s\n", indent, strings.Join(parts, ", "))
	}
	if len(p.DataTiers) > 0 {
		fmt.Fprintf(w, "%sData tiers:    %s\n", indent, display.Join(p.DataTiers, ", "))
	}
	if !p.Resources.IsZero() {
		fmt.Fprintf(w, "%sResources:     %s (%s)\n", indent, display.Text(p.Resources.String()), defaultsText())
	}
}

// shortImage shortens a reference to its name and the first 12 hex digits
// of its digest, as `docker images` shows IDs.
func shortImage(image string) string {
	name, digest, ok := strings.Cut(image, "@sha256:")
	if !ok || len(digest) < 12 {
		return display.Text(image)
	}
	return display.Text(name + "@sha256:" + digest[:12])
}
