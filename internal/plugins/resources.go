package plugins

import (
	"fmt"
	"strconv"
	"strings"
)

// Resources names what a plugin's container may use, each a quantity as a
// person writes it: Memory and Tmp in "Mi" or "Gi" ("512Mi", "1Gi"), CPU in
// whole cores or millicores ("1", "250m"). In a manifest it is what the
// plugin asks for instead of the defaults; in a grant, what the owner
// approved. An empty field means the default.
type Resources struct {
	// Memory is the memory the plugin's processes may hold, besides /tmp.
	Memory string `json:"memory,omitempty"`
	// CPU is the plugin's CPU limit.
	CPU string `json:"cpu,omitempty"`
	// Tmp is the size of the plugin's /tmp.
	Tmp string `json:"tmp,omitempty"`
}

// IsZero reports whether r names nothing, so the defaults apply.
func (r Resources) IsZero() bool { return r == Resources{} }

// The platform's resource bounds for a plugin. A manifest may ask for, and a
// grant approve, anything from the minimum to the maximum; what it does not
// ask for is the default, which needs no approval.
const (
	// Mi and Gi are the binary units a memory quantity is written in.
	Mi int64 = 1 << 20
	Gi int64 = 1 << 30

	// DefaultMemory is a plugin's memory when its manifest asks for none:
	// enough for a Go connector (about 20 MiB) and a small Node.js one
	// (about 60 MiB) with room for a sync's data.
	DefaultMemory = 128 * Mi
	// MinMemory is the least memory a manifest may ask for.
	MinMemory = 32 * Mi
	// MaxMemory is the most memory a manifest may ask for or a grant approve.
	MaxMemory = 2 * Gi

	// DefaultCPUMilli is a plugin's CPU limit when its manifest asks for none.
	DefaultCPUMilli int64 = 500
	// MinCPUMilli is the least CPU a manifest may ask for; it is also every
	// plugin's CPU request (CPURequestMilli), so a limit never falls below it.
	MinCPUMilli int64 = 100
	// MaxCPUMilli is the most CPU a manifest may ask for or a grant approve.
	MaxCPUMilli int64 = 2000
	// CPURequestMilli is every plugin's CPU request: what the scheduler
	// reserves, a small share; the limit is what it may burst to.
	CPURequestMilli int64 = 50

	// DefaultTmp is the size of a plugin's /tmp when its manifest asks for none.
	DefaultTmp = 64 * Mi
	// MinTmp is the least /tmp a manifest may ask for.
	MinTmp = 1 * Mi
	// MaxTmp is the most /tmp a manifest may ask for or a grant approve.
	MaxTmp = 1 * Gi

	// EphemeralRequest and EphemeralLimit bound the node disk a plugin's
	// container uses. Its root filesystem is read-only and /tmp is in
	// memory, so this is only its log, which the kubelet rotates at 10 MiB
	// times 5 files by default; a plugin above the limit is evicted alone.
	EphemeralRequest = 16 * Mi
	EphemeralLimit   = 64 * Mi
)

// maxQuantityLen bounds the text of one quantity before it is read.
const maxQuantityLen = 8

// ResourceLimits are a plugin's resources as numbers: bytes of memory and of
// /tmp, and thousandths of a CPU.
type ResourceLimits struct {
	MemoryBytes int64
	CPUMilli    int64
	TmpBytes    int64
}

// DefaultResourceLimits are what a plugin gets when its manifest asks for nothing.
func DefaultResourceLimits() ResourceLimits {
	return ResourceLimits{MemoryBytes: DefaultMemory, CPUMilli: DefaultCPUMilli, TmpBytes: DefaultTmp}
}

// String reads "memory 128Mi, cpu 500m, tmp 64Mi".
func (l ResourceLimits) String() string {
	return fmt.Sprintf("memory %s, cpu %s, tmp %s", FormatMemory(l.MemoryBytes), FormatCPU(l.CPUMilli), FormatMemory(l.TmpBytes))
}

// ParseMemory reads a memory or /tmp quantity strictly: a whole number from
// 1 to 99999 without leading zeros, then "Mi" or "Gi". Nothing else is
// accepted (no decimal point, exponent, sign, space or other unit), so the
// quantity means one thing to every reader, and it is also a valid
// Kubernetes quantity of the same value.
func ParseMemory(s string) (int64, error) {
	n, unit, err := splitQuantity(s)
	if err != nil {
		return 0, err
	}
	switch unit {
	case "Mi":
		return n * Mi, nil
	case "Gi":
		return n * Gi, nil
	}
	return 0, fmt.Errorf("%q: want a whole number then Mi or Gi, such as 256Mi", s)
}

// ParseCPU reads a CPU quantity strictly into thousandths of a CPU: a whole
// number of millicores from 1 to 99999 then "m" ("250m"), or whole cores
// from 1 to 99 ("1"); no leading zeros, decimal point or other unit.
func ParseCPU(s string) (int64, error) {
	n, unit, err := splitQuantity(s)
	if err != nil {
		return 0, err
	}
	switch {
	case unit == "m":
		return n, nil
	case unit == "" && n <= 99:
		return n * 1000, nil
	}
	return 0, fmt.Errorf("%q: want whole cores (1 to 99) or millicores, such as 2 or 250m", s)
}

// splitQuantity reads the leading digits of s (1 to 5 of them, not starting
// with 0) and returns their value and the rest of s.
func splitQuantity(s string) (int64, string, error) {
	if len(s) > maxQuantityLen {
		return 0, "", fmt.Errorf("longer than %d bytes", maxQuantityLen)
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	switch {
	case i == 0:
		return 0, "", fmt.Errorf("%q does not start with a digit", s)
	case s[0] == '0':
		return 0, "", fmt.Errorf("%q starts with 0", s)
	case i > 5:
		return 0, "", fmt.Errorf("%q has more than 5 digits", s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%q: %v", s, err)
	}
	return n, s[i:], nil
}

// FormatMemory writes bytes as ParseMemory reads them: whole Gi when it
// divides, else Mi (rounded up to a whole Mi, which only a value that did not
// come from ParseMemory needs).
func FormatMemory(b int64) string {
	if b > 0 && b%Gi == 0 {
		return strconv.FormatInt(b/Gi, 10) + "Gi"
	}
	return strconv.FormatInt((b+Mi-1)/Mi, 10) + "Mi"
}

// FormatCPU writes thousandths of a CPU as ParseCPU reads them: whole cores
// when it divides, else millicores.
func FormatCPU(milli int64) string {
	if milli > 0 && milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	return strconv.FormatInt(milli, 10) + "m"
}

// resourceDim is one dimension of Resources: its field name, how it is
// read, written and bounded, and where it sits in Resources and ResourceLimits.
type resourceDim struct {
	field         string
	parse         func(string) (int64, error)
	format        func(int64) string
	min, def, max int64
	text          func(*Resources) *string
	value         func(*ResourceLimits) *int64
}

// resourceDims are the three dimensions, in the order they are shown.
var resourceDims = [...]resourceDim{
	{"memory", ParseMemory, FormatMemory, MinMemory, DefaultMemory, MaxMemory,
		func(r *Resources) *string { return &r.Memory }, func(l *ResourceLimits) *int64 { return &l.MemoryBytes }},
	{"cpu", ParseCPU, FormatCPU, MinCPUMilli, DefaultCPUMilli, MaxCPUMilli,
		func(r *Resources) *string { return &r.CPU }, func(l *ResourceLimits) *int64 { return &l.CPUMilli }},
	{"tmp", ParseMemory, FormatMemory, MinTmp, DefaultTmp, MaxTmp,
		func(r *Resources) *string { return &r.Tmp }, func(l *ResourceLimits) *int64 { return &l.TmpBytes }},
}

// validateResources checks every quantity of r at field (such as
// "manifest.resources"): its grammar, and that it lies from the dimension's
// minimum (or, when atLeastDefault, its default: a grant never approves
// less than the default) to its maximum.
func validateResources(field string, r Resources, atLeastDefault bool) fieldErrors {
	var errs fieldErrors
	for _, d := range resourceDims {
		s := *d.text(&r)
		if s == "" {
			continue
		}
		f := field + "." + d.field
		if !errs.checkText(f, s, maxQuantityLen) {
			continue
		}
		v, err := d.parse(s)
		if err != nil {
			errs.add(f, ErrInvalidResources, err.Error())
			continue
		}
		lo := d.min
		if atLeastDefault {
			lo = d.def
		}
		if v < lo || v > d.max {
			errs.add(f, ErrInvalidResources, fmt.Sprintf("%s, want %s to %s", s, d.format(lo), d.format(d.max)))
		}
	}
	return errs
}

// requestedLimits is what a manifest's Resources ask for as numbers, each
// dimension it leaves empty (or, only for a manifest that failed validation,
// cannot be read) at its default.
func requestedLimits(r Resources) ResourceLimits {
	out := DefaultResourceLimits()
	for _, d := range resourceDims {
		if v, err := d.parse(*d.text(&r)); err == nil {
			*d.value(&out) = v
		}
	}
	return out
}

// grantedLimits is what a grant's Resources approve as numbers: each
// dimension at least its default, which needs no approval; one that cannot
// be read (only in a grant that failed validation) approves nothing above it.
func grantedLimits(r Resources) ResourceLimits {
	out := DefaultResourceLimits()
	for _, d := range resourceDims {
		if v, err := d.parse(*d.text(&r)); err == nil && v > d.def {
			*d.value(&out) = min(v, d.max)
		}
	}
	return out
}

// effectiveLimits is what a plugin runs with (D-16 for quantities): per
// dimension what the manifest asks for, but no more than the grant approves
// (a dimension the grant leaves empty approves the default), and never above
// the maximum. A request at or below the default needs no grant.
func effectiveLimits(request, grant Resources) ResourceLimits {
	req, granted := requestedLimits(request), grantedLimits(grant)
	out := ResourceLimits{}
	for _, d := range resourceDims {
		*d.value(&out) = min(*d.value(&req), *d.value(&granted), d.max)
	}
	return out
}

// pendingResources is what a manifest's Resources ask for beyond what the
// grant approves, each pending dimension written canonically; zero when
// nothing is pending.
func pendingResources(request, grant Resources) Resources {
	req, granted := requestedLimits(request), grantedLimits(grant)
	var out Resources
	for _, d := range resourceDims {
		if v := *d.value(&req); v > *d.value(&granted) {
			*d.text(&out) = d.format(v)
		}
	}
	return out
}

// sameResources reports whether two manifests' Resources ask for the same
// values ("1024Mi" equals "1Gi"; an empty field equals only an empty one). It
// fails closed: a quantity that cannot be read makes it report false.
func sameResources(a, b Resources) bool {
	for _, d := range resourceDims {
		x, y := *d.text(&a), *d.text(&b)
		if x == "" || y == "" {
			if x != y {
				return false
			}
			continue
		}
		vx, errx := d.parse(x)
		vy, erry := d.parse(y)
		if errx != nil || erry != nil || vx != vy {
			return false
		}
	}
	return true
}

// String reads "memory 512Mi, tmp 256Mi" for the fields r names, as
// written; "" when it names none. Text from a manifest or grant that failed
// validation is shown as written, so a caller showing it to a person
// escapes it.
func (r Resources) String() string { return describeResources(r) }

// describeResources reads "memory 512Mi, tmp 256Mi" for the fields r names.
func describeResources(r Resources) string {
	var parts []string
	for _, d := range resourceDims {
		if s := *d.text(&r); s != "" {
			parts = append(parts, d.field+" "+s)
		}
	}
	return strings.Join(parts, ", ")
}
