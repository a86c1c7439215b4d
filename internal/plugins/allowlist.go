package plugins

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AllowLists maps a plugin name to its egress allow-list: canonical
// "host:port" entries, sorted. It is what the operator publishes in the
// openfief-egress-allowlist ConfigMap and what the egress proxy enforces (D-32).
type AllowLists map[string][]string

// AllowListConfigMap is the name of the ConfigMap that carries AllowLists.
const AllowListConfigMap = "openfief-egress-allowlist"

// EncodeAllowLists renders each plugin's list as one ConfigMap value: sorted
// host:port lines, each ending in a newline. A plugin without hosts gets an
// empty value, meaning "none". Entries are canonicalised and de-duplicated;
// entries that are not egress hosts are dropped, so callers pass what Compile
// produced.
func EncodeAllowLists(lists AllowLists) map[string]string {
	out := make(map[string]string, len(lists))
	for name, hosts := range lists {
		out[name] = EncodeAllowList(hosts)
	}
	return out
}

// EncodeAllowList renders one plugin's list as EncodeAllowLists does. It
// writes only entries DecodeAllowLists reads back: a canonical form that is
// not its own canonical form (CanonicalEgressHost maps some invalid UTF-8 to
// an xn-- label it then refuses) is dropped, since one unreadable line would
// make the proxy refuse every plugin's list.
func EncodeAllowList(hosts []string) string {
	var b strings.Builder
	for _, h := range canonicalHosts(hosts) {
		if again, err := CanonicalEgressHost(h); err != nil || again != h {
			continue
		}
		b.WriteString(h)
		b.WriteByte('\n')
	}
	return b.String()
}

// DecodeAllowLists reads the ConfigMap data strictly, because the proxy
// refuses whatever it cannot read: every key a valid plugin name, every line
// a canonical host:port with the port written, ending in a newline, sorted,
// with no duplicates and no blank lines. One bad entry refuses the whole
// document; the proxy then fails closed.
func DecodeAllowLists(data map[string]string) (AllowLists, error) {
	var errs fieldErrors
	out := make(AllowLists, len(data))
	for _, name := range slices.Sorted(maps.Keys(data)) {
		field := fmt.Sprintf("data[%s]", name)
		if err := ValidateName(name); err != nil {
			errs.add(field, ErrInvalidAllowList, "key is not a plugin name")
			continue
		}
		hosts, err := decodeAllowList(data[name])
		if err != nil {
			errs.add(field, ErrInvalidAllowList, err.Error())
			continue
		}
		out[name] = hosts
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return out, nil
}

func decodeAllowList(value string) ([]string, error) {
	hosts := []string{}
	if value == "" {
		return hosts, nil
	}
	if !strings.HasSuffix(value, "\n") {
		return nil, fmt.Errorf("last line does not end in a newline")
	}
	for i, line := range strings.Split(strings.TrimSuffix(value, "\n"), "\n") {
		canon, err := CanonicalEgressHost(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		if canon != line || !strings.Contains(line, ":") {
			return nil, fmt.Errorf("line %d: %q is not canonical (want %q)", i+1, line, canon)
		}
		if n := len(hosts); n > 0 && hosts[n-1] >= line {
			if hosts[n-1] == line {
				return nil, fmt.Errorf("line %d: %q repeated", i+1, line)
			}
			return nil, fmt.Errorf("line %d: %q is out of order", i+1, line)
		}
		hosts = append(hosts, line)
	}
	return hosts, nil
}

// Allows reports whether plugin may open a tunnel to target, which must
// already be canonical (CanonicalEgressHost).
func (a AllowLists) Allows(plugin, target string) bool {
	_, found := slices.BinarySearch(a[plugin], target)
	return found
}
