package netpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ErrInvalid is returned for input the engine cannot judge: a policy check
// refuses, a role the world lacks, or anything the engine panics on.
var ErrInvalid = errors.New("netpolicy: invalid input")

// Compute judges every cell of Cells(w.Ports) with the reference engine,
// cyclonus's matcher, against policies: a connection is allowed when every
// policy selecting its source admits it as egress (or none selects the
// source) and every policy selecting its destination admits it as ingress
// (or none does); an address that is no pod is never selected. Only the
// policies passed count: pass every policy of the cluster. It fails closed:
// on invalid input it returns ErrInvalid and no table.
func Compute(w World, policies []*networkingv1.NetworkPolicy) (_ Table, err error) {
	for _, p := range policies {
		if err := check(p); err != nil {
			return nil, fmt.Errorf("%w: NetworkPolicy %s/%s: %w", ErrInvalid, p.Namespace, p.Name, err)
		}
	}
	defer func() {
		// cyclonus panics on policies it considers invalid that check
		// lets through (a port range ending before it starts).
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the engine refused the policies: %v", ErrInvalid, r)
		}
	}()
	copies := make([]*networkingv1.NetworkPolicy, 0, len(policies))
	for _, p := range policies {
		copies = append(copies, p.DeepCopy())
	}
	engine := matcher.BuildNetworkPolicies(false, copies)

	cells := Cells(w.Ports)
	out := make(Table, 0, len(cells))
	for _, c := range cells {
		from, ok := w.Peers[c.From]
		if !ok {
			return nil, fmt.Errorf("%w: cell %q: the world has no %s", ErrInvalid, c.Name, c.From)
		}
		to, ok := w.Peers[c.To]
		if !ok {
			return nil, fmt.Errorf("%w: cell %q: the world has no %s", ErrInvalid, c.Name, c.To)
		}
		res := engine.IsTrafficAllowed(&matcher.Traffic{
			Source:       trafficPeer(from),
			Destination:  trafficPeer(to),
			ResolvedPort: c.Port,
			Protocol:     c.Protocol,
		})
		v := Refused
		if res.IsAllowed() {
			v = Allowed
		}
		out = append(out, Row{Cell: c, Verdict: v, Why: explain("egress", res.Egress) + "; " + explain("ingress", res.Ingress)})
	}
	return out, nil
}

// check refuses what the engine would judge silently but wrongly: no
// namespace (it would assume "default"), no policyTypes (it panics), an empty peer or one with an ipBlock and a
// selector (the API server refuses both; the engine would read the first as
// every pod of the namespace and ignore the selectors of the second), and a named port
// (cells carry numbers; the engine would never match the name).
func check(p *networkingv1.NetworkPolicy) error {
	if p.Namespace == "" {
		return errors.New("no namespace")
	}
	if len(p.Spec.PolicyTypes) == 0 {
		return errors.New("no policyTypes")
	}
	var peers []networkingv1.NetworkPolicyPeer
	var ports []networkingv1.NetworkPolicyPort
	for _, r := range p.Spec.Ingress {
		peers, ports = append(peers, r.From...), append(ports, r.Ports...)
	}
	for _, r := range p.Spec.Egress {
		peers, ports = append(peers, r.To...), append(ports, r.Ports...)
	}
	for _, peer := range peers {
		selector := peer.PodSelector != nil || peer.NamespaceSelector != nil
		switch {
		case peer.IPBlock == nil && !selector:
			return errors.New("an empty peer")
		case peer.IPBlock != nil && selector:
			return errors.New("a peer has an ipBlock and a selector")
		}
	}
	for _, port := range ports {
		if port.Port != nil && port.Port.Type == intstr.String {
			return fmt.Errorf("named port %q", port.Port.StrVal)
		}
	}
	return nil
}

// trafficPeer is p as the engine sees it.
func trafficPeer(p Peer) *matcher.TrafficPeer {
	if !p.IsPod() {
		return &matcher.TrafficPeer{IP: p.IP}
	}
	return &matcher.TrafficPeer{IP: p.IP, Internal: &matcher.InternalPeer{
		Namespace: p.Namespace, NamespaceLabels: p.NamespaceLabels, PodLabels: p.PodLabels,
	}}
}

// explain names the policies that decided one direction, sorted: "egress
// open" when none selects the pod, else who allowed or refused it.
func explain(direction string, d *matcher.DirectionResult) string {
	if len(d.AllowingTargets) == 0 && len(d.DenyingTargets) == 0 {
		return direction + " open"
	}
	if len(d.AllowingTargets) > 0 {
		return direction + " allowed by " + policyNames(d.AllowingTargets)
	}
	return direction + " refused by " + policyNames(d.DenyingTargets)
}

func policyNames(targets []*matcher.Target) string {
	var names []string
	for _, t := range targets {
		for _, p := range t.SourceRules {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}
