package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// MaxEgressHosts caps a manifest's or grant's egress list, as the CRD does.
const MaxEgressHosts = 64

// MaxImagePullSecrets caps a grant's image pull Secrets, as the CRD does.
const MaxImagePullSecrets = 8

// tokenDir is where the projected ServiceAccount tokens live; no Secret may be
// mounted over or under it.
const tokenDir = "/var/run/secrets"

// Validate checks the plugin: its name, image reference, manifest and config.
// It returns every problem at once, joined, each a *FieldError.
func (p Plugin) Validate() error {
	var errs fieldErrors
	if errs.checkText("name", p.Name, 0) {
		if err := ValidateName(p.Name); err != nil {
			errs.add("name", sentinelOf(err), detailOf(err))
		}
	}
	if errs.checkText("image", p.Image, 0) {
		if _, err := ParseImageRef(p.Image); err != nil {
			errs.add("image", ErrInvalidImage, detailOf(err))
		}
	}
	errs = append(errs, p.Manifest.validate("manifest")...)
	if len(bytes.TrimSpace(p.Config)) > 0 {
		if err := checkJSONObject(p.Config); err != nil {
			errs.add("config", ErrInvalidJSON, err.Error())
		}
	}
	return errs.err()
}

// Validate checks the manifest against the rules of D-11 and D-42: known
// capabilities, canonical egress hosts, 0 to MaxOwnerEgress owner egress
// slots (OF-36), valid Secret slots and mount paths, data tier names,
// resources that ParseMemory and ParseCPU read and that lie within the
// platform's minimum and maximum, and a JSON config schema. Field paths start with "manifest".
func (m Manifest) Validate() error { return m.validate("manifest").err() }

func (m Manifest) validate(prefix string) fieldErrors {
	var errs fieldErrors
	if len(m.Capabilities) == 0 {
		errs.add(prefix+".capabilities", ErrRequired, "at least one capability")
	}
	errs = append(errs, validateCapabilities(prefix+".capabilities", m.Capabilities)...)
	errs = append(errs, validateEgress(prefix+".egress", m.Egress, MaxEgressHosts)...)
	if m.OwnerEgress < 0 || m.OwnerEgress > MaxOwnerEgress {
		errs.add(prefix+".ownerEgress", ErrInvalidOwnerEgress, fmt.Sprintf("%d, want 0 to %d", m.OwnerEgress, MaxOwnerEgress))
	}
	errs = append(errs, validateSecretMounts(prefix+".secrets", m.Secrets)...)
	errs = append(errs, validateDataTiers(prefix+".dataTiers", m.DataTiers)...)
	errs = append(errs, validateResources(prefix+".resources", m.Resources, false)...)
	if len(m.ConfigSchema) > 0 {
		if err := checkJSONSchemaShape(m.ConfigSchema); err != nil {
			errs.add(prefix+".configSchema", ErrInvalidJSON, err.Error())
		} else {
			errs = append(errs, checkSchemaText(prefix+".configSchema", m.ConfigSchema)...)
		}
	}
	return errs
}

// Validate checks the grant: the plugin name it approves and every list it
// holds. Field paths start with "grant". A grant may approve more than the
// plugin requests; Effective ignores the excess (D-16). Its OwnerEgress holds
// at most MaxOwnerEgress canonical hosts, none also in Egress (OF-36); how
// many a plugin may use is its manifest's, which Effective checks. Its
// Resources lie from the defaults to the maxima.
func (g Grant) Validate() error {
	var errs fieldErrors
	if errs.checkText("grant.name", g.Name, 0) {
		if err := ValidateName(g.Name); err != nil {
			errs.add("grant.name", sentinelOf(err), detailOf(err))
		}
	}
	errs = append(errs, validateCapabilities("grant.capabilities", g.Capabilities)...)
	errs = append(errs, validateEgress("grant.egress", g.Egress, MaxEgressHosts)...)
	errs = append(errs, validateOwnerEgress(g.Egress, g.OwnerEgress)...)
	seen := map[string]int{}
	for i, s := range g.Secrets {
		field := fmt.Sprintf("grant.secrets[%d]", i)
		errs.checkSlotName(field+".name", s.Name, i, seen, "already granted at secrets[%d]")
		switch {
		case !errs.checkText(field+".secretName", s.SecretName, 0):
		case s.SecretName != "" && !isDNSSubdomain(s.SecretName):
			errs.add(field+".secretName", ErrInvalidSecretName, fmt.Sprintf("%q is not a Kubernetes Secret name", s.SecretName))
		}
	}
	errs = append(errs, validateDataTiers("grant.dataTiers", g.DataTiers)...)
	errs = append(errs, validatePullSecrets("grant.imagePullSecrets", g.ImagePullSecrets)...)
	errs = append(errs, validateResources("grant.resources", g.Resources, true)...)
	return errs.err()
}

// validatePullSecrets checks a grant's image pull Secrets: Secret names, at
// most MaxImagePullSecrets, none twice.
func validatePullSecrets(field string, names []string) fieldErrors {
	var errs fieldErrors
	if len(names) > MaxImagePullSecrets {
		errs.add(field, ErrInvalidSecretName, fmt.Sprintf("%d pull Secrets, at most %d", len(names), MaxImagePullSecrets))
	}
	seen := map[string]int{}
	for i, n := range names {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !errs.checkText(f, n, 0) {
			continue
		}
		if !isDNSSubdomain(n) {
			errs.add(f, ErrInvalidSecretName, fmt.Sprintf("%q is not a Kubernetes Secret name", n))
			continue
		}
		if j, dup := seen[n]; dup {
			errs.add(f, ErrDuplicate, fmt.Sprintf("%q already listed at [%d]", n, j))
			continue
		}
		seen[n] = i
	}
	return errs
}

func validateCapabilities(field string, caps []Capability) fieldErrors {
	var errs fieldErrors
	seen := map[Capability]int{}
	for i, c := range caps {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !errs.checkText(f, string(c), 0) {
			continue
		}
		if !knownCapability(c) {
			errs.add(f, ErrInvalidCapability, fmt.Sprintf("%q (want %q or %q)", c, CapabilityConnector, CapabilityView))
			continue
		}
		if j, dup := seen[c]; dup {
			errs.add(f, ErrDuplicate, fmt.Sprintf("%q already listed at [%d]", c, j))
			continue
		}
		seen[c] = i
	}
	return errs
}

// validateOwnerEgress checks a grant's hosts of the owner's choosing as
// validateEgress does, at most MaxOwnerEgress of them, and refuses one the
// grant's egress list holds too: a host is granted in one list or the other.
func validateOwnerEgress(egress, owner []string) fieldErrors {
	errs := validateEgress("grant.ownerEgress", owner, MaxOwnerEgress)
	listed := map[string]int{}
	for i, h := range egress {
		if c, err := CanonicalEgressHost(h); err == nil {
			if _, dup := listed[c]; !dup {
				listed[c] = i
			}
		}
	}
	for i, h := range owner {
		c, err := CanonicalEgressHost(h)
		if err != nil || CheckText(h, 0) != nil {
			continue // validateEgress reported it
		}
		if j, dup := listed[c]; dup {
			errs.add(fmt.Sprintf("grant.ownerEgress[%d]", i), ErrDuplicate, fmt.Sprintf("%q is %s, already granted at egress[%d]", h, c, j))
		}
	}
	return errs
}

// validateEgress checks a list of egress hosts: at most limit, each
// canonicalising (CanonicalEgressHost), none twice.
func validateEgress(field string, hosts []string, limit int) fieldErrors {
	var errs fieldErrors
	if len(hosts) > limit {
		errs.add(field, ErrInvalidEgressHost, fmt.Sprintf("%d hosts, at most %d", len(hosts), limit))
	}
	seen := map[string]int{}
	for i, h := range hosts {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !errs.checkText(f, h, 0) {
			continue
		}
		canon, err := CanonicalEgressHost(h)
		if err != nil {
			errs.add(f, ErrInvalidEgressHost, detailOf(err))
			continue
		}
		if j, dup := seen[canon]; dup {
			errs.add(f, ErrDuplicate, fmt.Sprintf("%q is %s, already listed at [%d]", h, canon, j))
			continue
		}
		seen[canon] = i
	}
	return errs
}

func validateSecretMounts(field string, secrets []SecretMount) fieldErrors {
	var errs fieldErrors
	seen := map[string]int{}
	for i, s := range secrets {
		f := fmt.Sprintf("%s[%d]", field, i)
		errs.checkSlotName(f+".name", s.Name, i, seen, "already listed at [%d]")
		if !errs.checkText(f+".mountPath", s.MountPath, MaxMountPathLen) {
			continue
		}
		if err := checkMountPath(s.MountPath); err != nil {
			errs.add(f+".mountPath", ErrInvalidMountPath, err.Error())
			continue
		}
		for j := 0; j < i; j++ {
			if CheckText(secrets[j].MountPath, MaxMountPathLen) == nil && checkMountPath(secrets[j].MountPath) == nil && pathsOverlap(s.MountPath, secrets[j].MountPath) {
				errs.add(f+".mountPath", ErrInvalidMountPath, fmt.Sprintf("%q overlaps %q at [%d]", s.MountPath, secrets[j].MountPath, j))
				break
			}
		}
	}
	return errs
}

// TmpDir is where the operator mounts a plugin's writable scratch directory
// (an emptyDir; the root filesystem is read-only). No Secret may mount there.
const TmpDir = "/tmp"

// exclusiveMountPaths are the directories a Secret may neither mount at, nor
// above, nor inside: the operator's own mounts (TmpDir, and tokenDir with the
// tokens and the signing keys) and the kernel's filesystems, which a
// container runtime refuses to mount over. A Secret there would make the
// apply fail for ever, or shadow what the operator mounted.
var exclusiveMountPaths = []string{"/dev", "/proc", "/sys", TmpDir, tokenDir}

// systemMountPaths are directories a Secret may not mount at or above,
// because it would hide the image's programs, libraries, CA bundle or user
// database; a directory of its own inside them (/etc/bank) is fine.
var systemMountPaths = []string{"/bin", "/etc", "/home", "/lib", "/lib64", "/root", "/run", "/sbin", "/usr", "/var", "/var/run"}

// checkMountPath requires an absolute, clean path other than "/" that stays
// clear of the directories the operator and the image need (see
// exclusiveMountPaths and systemMountPaths).
func checkMountPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty")
	case !path.IsAbs(p):
		return fmt.Errorf("%q is not absolute", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q is not clean (want %q)", p, path.Clean(p))
	case p == "/":
		return fmt.Errorf("cannot mount over /")
	case strings.ContainsAny(p, "\x00:"):
		return fmt.Errorf("%q holds a NUL or ':'", p)
	}
	for _, r := range exclusiveMountPaths {
		if pathsOverlap(p, r) {
			return fmt.Errorf("%q overlaps %s, which is reserved", p, r)
		}
	}
	for _, r := range systemMountPaths {
		if p == r || strings.HasPrefix(r, p+"/") {
			return fmt.Errorf("%q would hide %s of the image; mount in a directory of its own, such as %s/plugin", p, r, r)
		}
	}
	return nil
}

// pathsOverlap reports whether one clean absolute path equals the other or
// lies under it.
func pathsOverlap(a, b string) bool {
	if a == b {
		return true
	}
	return strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/") || a == "/" || b == "/"
}

// maxDataTierLen bounds a data tier name.
const maxDataTierLen = 32

func validateDataTiers(field string, tiers []string) fieldErrors {
	var errs fieldErrors
	seen := map[string]int{}
	for i, t := range tiers {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !errs.checkText(f, t, 0) {
			continue
		}
		if !isDataTier(t) {
			errs.add(f, ErrInvalidDataTier, fmt.Sprintf("%q is not 1 to %d letters, digits, '-' or '_'", t, maxDataTierLen))
			continue
		}
		if j, dup := seen[t]; dup {
			errs.add(f, ErrDuplicate, fmt.Sprintf("%q already listed at [%d]", t, j))
			continue
		}
		seen[t] = i
	}
	return errs
}

func isDataTier(t string) bool {
	if t == "" || len(t) > maxDataTierLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// checkJSONObject requires exactly one JSON object.
func checkJSONObject(raw []byte) error {
	v, err := decodeOneJSON(raw)
	if err != nil {
		return err
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("config must be a JSON object")
	}
	return nil
}

// checkJSONSchemaShape requires one JSON value that can be a schema: an object
// or a boolean. Whether it is a valid JSON Schema is the operator's check.
func checkJSONSchemaShape(raw []byte) error {
	v, err := decodeOneJSON(raw)
	if err != nil {
		return err
	}
	switch v.(type) {
	case map[string]any, bool:
		return nil
	}
	return fmt.Errorf("a JSON Schema must be an object or a boolean")
}

// decodeOneJSON decodes exactly one JSON value, keeping numbers exact, and
// refuses trailing data.
func decodeOneJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// wrappedSentinels are the sentinels the single-value checkers (ValidateName,
// ParseImageRef, CanonicalEgressHost) wrap as "sentinel: detail".
var wrappedSentinels = [...]error{ErrRequired, ErrInvalidName, ErrInvalidImage, ErrInvalidEgressHost}

// sentinelOf returns the sentinel a helper's error wraps, for FieldError.Err.
func sentinelOf(err error) error {
	for _, s := range wrappedSentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// detailOf strips a leading sentinel text from err, since FieldError prints
// the sentinel itself.
func detailOf(err error) string {
	s := err.Error()
	for _, sen := range wrappedSentinels {
		if rest, ok := strings.CutPrefix(s, sen.Error()); ok {
			return strings.TrimPrefix(rest, ": ")
		}
	}
	return s
}

// canonicalHosts returns the canonical, sorted, de-duplicated form of hosts,
// dropping any that do not canonicalise. Callers validate first.
func canonicalHosts(hosts []string) []string {
	set := map[string]struct{}{}
	for _, h := range hosts {
		if c, err := CanonicalEgressHost(h); err == nil {
			set[c] = struct{}{}
		}
	}
	return sortedKeys(set)
}

// checkSlotName checks the name of the i-th Secret slot of a list: safe
// text, a Secret name, and not one seen earlier in the list (seen maps
// names to their index; dup says where the first one is, with %d).
func (fe *fieldErrors) checkSlotName(field, name string, i int, seen map[string]int, dup string) {
	if !fe.checkText(field, name, 0) {
		return
	}
	if !isDNSSubdomain(name) {
		fe.add(field, ErrInvalidSecretName, fmt.Sprintf("%q is not a Kubernetes Secret name", name))
		return
	}
	if j, ok := seen[name]; ok {
		fe.add(field, ErrDuplicate, fmt.Sprintf("%q "+dup, name, j))
		return
	}
	seen[name] = i
}
