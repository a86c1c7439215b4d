package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// printManifest writes a manifest as labelled lines, egress hosts in their
// canonical host:port form and the config schema indented.
func printManifest(w io.Writer, indent string, m plugins.Manifest) {
	caps := make([]string, len(m.Capabilities))
	for i, c := range m.Capabilities {
		caps[i] = string(c)
	}
	secrets := make([]string, len(m.Secrets))
	for i, s := range m.Secrets {
		secrets[i] = s.Name + " at " + s.MountPath
	}
	fmt.Fprintf(w, "%sCapabilities:  %s\n", indent, orNone(sorted(caps)))
	fmt.Fprintf(w, "%sEgress:        %s\n", indent, orNone(canonical(m.Egress)))
	fmt.Fprintf(w, "%sSecrets:       %s\n", indent, orNone(sorted(secrets)))
	fmt.Fprintf(w, "%sData tiers:    %s\n", indent, orNone(sorted(m.DataTiers)))
	if len(bytes.TrimSpace(m.ConfigSchema)) == 0 {
		fmt.Fprintf(w, "%sConfig schema: none (any config object)\n", indent)
		return
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, m.ConfigSchema, indent+"  ", "  "); err != nil {
		fmt.Fprintf(w, "%sConfig schema: %s\n", indent, m.ConfigSchema)
		return
	}
	fmt.Fprintf(w, "%sConfig schema:\n%s  %s\n", indent, indent, buf.String())
}

// canonical returns egress hosts in canonical host:port form, sorted; a
// host that does not canonicalise is shown as written.
func canonical(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if c, err := plugins.CanonicalEgressHost(h); err == nil {
			h = c
		}
		out = append(out, h)
	}
	return sorted(out)
}

// sorted returns a sorted copy.
func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// orNone joins items with ", ", or says "none".
func orNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

// describePending lists what waits for approval, one kind per line, with
// where each Secret slot would be mounted.
func describePending(w io.Writer, indent string, p plugins.Pending, m plugins.Manifest) {
	if len(p.Capabilities) > 0 {
		caps := make([]string, len(p.Capabilities))
		for i, c := range p.Capabilities {
			caps[i] = string(c)
		}
		fmt.Fprintf(w, "%sCapabilities:  %s\n", indent, strings.Join(caps, ", "))
	}
	if len(p.Egress) > 0 {
		fmt.Fprintf(w, "%sEgress:        %s\n", indent, strings.Join(p.Egress, ", "))
	}
	if len(p.Secrets) > 0 {
		mounts := map[string]string{}
		for _, s := range m.Secrets {
			mounts[s.Name] = s.MountPath
		}
		parts := make([]string, len(p.Secrets))
		for i, s := range p.Secrets {
			parts[i] = s + " at " + mounts[s]
		}
		fmt.Fprintf(w, "%sSecrets:       %s\n", indent, strings.Join(parts, ", "))
	}
	if len(p.DataTiers) > 0 {
		fmt.Fprintf(w, "%sData tiers:    %s\n", indent, strings.Join(p.DataTiers, ", "))
	}
}

// shortImage shortens a reference to its name and the first 12 hex digits
// of its digest, as `docker images` shows IDs.
func shortImage(image string) string {
	name, digest, ok := strings.Cut(image, "@sha256:")
	if !ok || len(digest) < 12 {
		return image
	}
	return name + "@sha256:" + digest[:12]
}

// age is how long ago t was, in kubectl's short form; "<unknown>" for zero.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
