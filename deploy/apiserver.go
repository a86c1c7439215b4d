package deploy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// APIServerPlaceholder is the ipBlock deploy/core/networkpolicy.yaml names
// where the API server's addresses belong: TEST-NET-1 (RFC 5737), where no
// API server is, so an install that fills in nothing is closed, not open.
const APIServerPlaceholder = "192.0.2.1/32"

// CoreNetworkPolicy is the name of the core's NetworkPolicy, the one that
// names the API server.
const CoreNetworkPolicy = "openfief-core"

// APIServerCIDRs checks and normalises the API server's addresses for the
// core's NetworkPolicy: each an IP address (made /32 or /128) or a CIDR
// (masked to its network), none covering every address, sorted and without
// duplicates. An empty list is refused: the core would then reach no API
// server.
func APIServerCIDRs(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("no API server address")
	}
	seen := map[netip.Prefix]bool{}
	for _, s := range in {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			addr, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("API server address %q is neither an IP address nor a CIDR", s)
			}
			if addr.Zone() != "" {
				return nil, fmt.Errorf("API server address %q has a zone, which an ipBlock cannot name", s)
			}
			p = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		p = p.Masked()
		if p.Bits() == 0 {
			return nil, fmt.Errorf("API server CIDR %q covers every address: the core's owner port would be open to anyone", s)
		}
		seen[p] = true
	}
	out := make([]netip.Prefix, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	strs := make([]string, len(out))
	for i, p := range out {
		strs[i] = p.String()
	}
	return strs, nil
}

// APIServerPatch is a JSON patch (RFC 6902) for the core's NetworkPolicy
// that replaces both placeholder peers with one ipBlock per CIDR, as a
// kustomize overlay applies it. It first tests that each placeholder is
// where deploy/core/networkpolicy.yaml puts it, so a reordered policy fails
// the build instead of opening another rule.
func APIServerPatch(cidrs []string) (string, error) {
	cidrs, err := APIServerCIDRs(cidrs)
	if err != nil {
		return "", err
	}
	peers := make([]map[string]any, len(cidrs))
	for i, c := range cidrs {
		peers[i] = map[string]any{"ipBlock": map[string]any{"cidr": c}}
	}
	ops := []map[string]any{
		{"op": "test", "path": "/spec/ingress/1/from", "value": []map[string]any{{"ipBlock": map[string]any{"cidr": APIServerPlaceholder}}}},
		{"op": "replace", "path": "/spec/ingress/1/from", "value": peers},
		{"op": "test", "path": "/spec/egress/2/to", "value": []map[string]any{{"ipBlock": map[string]any{"cidr": APIServerPlaceholder}}}},
		{"op": "replace", "path": "/spec/egress/2/to", "value": peers},
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// SetAPIServer replaces, in the core's NetworkPolicy among objs, every rule
// peer that is the placeholder ipBlock by one ipBlock per CIDR. It returns
// how many rules it changed: zero when the objects already name the API
// server (an overlay set it) or hold no such policy.
func SetAPIServer(objs []*unstructured.Unstructured, cidrs []string) (int, error) {
	cidrs, err := APIServerCIDRs(cidrs)
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, u := range objs {
		if u.GetKind() != "NetworkPolicy" || u.GetName() != CoreNetworkPolicy {
			continue
		}
		for _, dir := range []struct{ rules, peers string }{{"ingress", "from"}, {"egress", "to"}} {
			rules, _, err := unstructured.NestedSlice(u.Object, "spec", dir.rules)
			if err != nil {
				return 0, fmt.Errorf("NetworkPolicy %s: spec.%s: %w", u.GetName(), dir.rules, err)
			}
			for i, r := range rules {
				rule, ok := r.(map[string]any)
				if !ok {
					continue
				}
				peers, _ := rule[dir.peers].([]any)
				var kept []any
				found := false
				for _, p := range peers {
					if cidr, _, _ := unstructured.NestedString(asMap(p), "ipBlock", "cidr"); cidr == APIServerPlaceholder {
						found = true
						continue
					}
					kept = append(kept, p)
				}
				if !found {
					continue
				}
				for _, c := range cidrs {
					kept = append(kept, map[string]any{"ipBlock": map[string]any{"cidr": c}})
				}
				rule[dir.peers] = kept
				rules[i] = rule
				changed++
			}
			if changed > 0 {
				if err := unstructured.SetNestedSlice(u.Object, rules, "spec", dir.rules); err != nil {
					return 0, err
				}
			}
		}
	}
	return changed, nil
}

// asMap is v as a JSON object, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// APIServerPlaceholders counts the rules of the core's NetworkPolicy among
// objs that still name APIServerPlaceholder: two as committed, none once an
// overlay or an installer named the API server.
func APIServerPlaceholders(objs []*unstructured.Unstructured) int {
	n := 0
	for _, u := range objs {
		if u.GetKind() != "NetworkPolicy" || u.GetName() != CoreNetworkPolicy {
			continue
		}
		for _, dir := range []struct{ rules, peers string }{{"ingress", "from"}, {"egress", "to"}} {
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", dir.rules)
			for _, r := range rules {
				peers, _ := asMap(r)[dir.peers].([]any)
				if slices.ContainsFunc(peers, func(p any) bool {
					cidr, _, _ := unstructured.NestedString(asMap(p), "ipBlock", "cidr")
					return cidr == APIServerPlaceholder
				}) {
					n++
				}
			}
		}
	}
	return n
}
