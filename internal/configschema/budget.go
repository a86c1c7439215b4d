package configschema

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxEvaluationCost bounds the work Validate lets the library do for one
// schema and one config, in units of about one subschema applied to one
// value. The library has no budget of its own and memoises nothing, so a
// schema whose references branch back into themselves multiplies the work
// by its branching at every level of the config: the adversarial review
// measured 12.9 s for 2.4 KB of schema and a three-level config, and
// 6 min 50 s for a 252 KB schema on a flat one. Validate first counts, in
// time linear in schema size times config size, an upper bound of what the
// library would do, and refuses the pair when it exceeds this budget.
const maxEvaluationCost = 1 << 16

// valueNode is a config value as the cost count sees it: objects with their
// member names, arrays, and leaves. Nodes have identities, so the count can
// remember its answer for each (subschema, value) pair.
type valueNode struct {
	keys    []string // of an object, beside members
	members []*valueNode
	isObj   bool
	isArr   bool
}

// newValueNode mirrors a decoded JSON value.
func newValueNode(v any) *valueNode {
	switch v := v.(type) {
	case map[string]any:
		n := &valueNode{isObj: true, members: make([]*valueNode, 0, len(v)), keys: make([]string, 0, len(v))}
		for k, m := range v {
			n.keys = append(n.keys, k)
			n.members = append(n.members, newValueNode(m))
		}
		return n
	case []any:
		n := &valueNode{isArr: true, members: make([]*valueNode, 0, len(v))}
		for _, m := range v {
			n.members = append(n.members, newValueNode(m))
		}
		return n
	}
	return &valueNode{}
}

// costKey is one subschema applied to one value.
type costKey struct {
	s *jsonschema.Schema
	n *valueNode
}

// costCounter counts an upper bound of the library's work: every
// applicator applied to every value it could reach, every branch of
// anyOf/oneOf/if taken, a dynamic reference to every schema that could
// answer it. Counts saturate just above maxEvaluationCost.
type costCounter struct {
	memo   map[costKey]int
	active map[costKey]bool
	// dynamic lists, by anchor name, the schemas a $dynamicRef could
	// resolve to; recursive the ones a $recursiveRef could.
	dynamic   map[string][]*jsonschema.Schema
	recursive []*jsonschema.Schema
	// name stands for every property name propertyNames checks.
	name *valueNode
}

// evaluationCost is the upper bound of the library's work to validate the
// decoded config against root, saturating above maxEvaluationCost.
func evaluationCost(root *jsonschema.Schema, config any) int {
	c := &costCounter{memo: map[costKey]int{}, active: map[costKey]bool{}, dynamic: map[string][]*jsonschema.Schema{}, name: &valueNode{}}
	c.collectAnchors(root, map[*jsonschema.Schema]bool{})
	return c.cost(root, newValueNode(config))
}

// collectAnchors finds every schema reachable from s that declares a
// $dynamicAnchor or a $recursiveAnchor.
func (c *costCounter) collectAnchors(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if s.DynamicAnchor != "" {
		c.dynamic[s.DynamicAnchor] = append(c.dynamic[s.DynamicAnchor], s)
	}
	if s.RecursiveAnchor {
		c.recursive = append(c.recursive, s)
	}
	for _, sub := range subschemas(s) {
		c.collectAnchors(sub, seen)
	}
}

// add sums two costs, saturating.
func add(a, b int) int { return min(a+b, maxEvaluationCost+1) }

// cost is the work of applying s to n.
func (c *costCounter) cost(s *jsonschema.Schema, n *valueNode) int {
	if s == nil {
		return 0
	}
	k := costKey{s, n}
	if v, ok := c.memo[k]; ok {
		return v
	}
	if c.active[k] {
		return 1 // the library stops here with a reference cycle
	}
	c.active[k] = true
	total := c.ownCost(s, n)
	for _, sub := range c.inPlace(s) {
		total = add(total, c.cost(sub, n))
	}
	for i, m := range n.members {
		for _, sub := range memberSchemas(s, n, i) {
			total = add(total, c.cost(sub, m))
		}
		if n.isObj && s.PropertyNames != nil {
			total = add(total, c.cost(s.PropertyNames, c.name))
		}
		if total > maxEvaluationCost {
			break
		}
	}
	delete(c.active, k)
	c.memo[k] = total
	return total
}

// ownCost is the work s does on n itself, besides its subschemas: one unit,
// plus one per enum value, required name and dependency, per member for
// the objects' pattern matching, and the pairs uniqueItems compares.
func (c *costCounter) ownCost(s *jsonschema.Schema, n *valueNode) int {
	if s.ContentSchema != nil && s.ContentMediaType != nil {
		// Never compiled here (content is not asserted); if it were, the
		// decoded content would be a value the count cannot see.
		return maxEvaluationCost + 1
	}
	w := 1 + len(s.Required) + len(s.Dependencies) + len(s.DependentRequired)
	if s.Enum != nil {
		w += len(s.Enum.Values)
	}
	if n.isObj {
		w += len(n.members) * (1 + len(s.PatternProperties))
	}
	if n.isArr && s.UniqueItems {
		w = add(w, len(n.members)*len(n.members)/2)
	}
	return min(w, maxEvaluationCost+1)
}

// inPlace lists the subschemas s applies to the same value: references
// (a dynamic one to every schema that could answer it), the combinators,
// the conditionals and the dependent schemas.
func (c *costCounter) inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	subs := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else}
	if s.RecursiveRef != nil {
		subs = append(subs, s.RecursiveRef)
		subs = append(subs, c.recursive...)
	}
	if s.DynamicRef != nil {
		subs = append(subs, s.DynamicRef.Ref)
		if s.DynamicRef.Anchor != "" {
			subs = append(subs, c.dynamic[s.DynamicRef.Anchor]...)
		}
	}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	for _, sub := range s.DependentSchemas {
		subs = append(subs, sub)
	}
	for _, v := range s.Dependencies {
		subs = appendSchema(subs, v)
	}
	return subs
}

// memberSchemas lists the subschemas s applies to member i of n: the ones
// its name or position selects, and the unevaluated* and contains ones,
// which may apply to any member.
func memberSchemas(s *jsonschema.Schema, n *valueNode, i int) []*jsonschema.Schema {
	var subs []*jsonschema.Schema
	switch {
	case n.isObj:
		name := n.keys[i]
		matched := false
		if sub, ok := s.Properties[name]; ok {
			subs, matched = append(subs, sub), true
		}
		for re, sub := range s.PatternProperties {
			if re.MatchString(name) {
				subs, matched = append(subs, sub), true
			}
		}
		if !matched {
			subs = appendSchema(subs, s.AdditionalProperties)
		}
		subs = append(subs, s.UnevaluatedProperties)
	case n.isArr:
		subs = append(subs, s.Contains, s.UnevaluatedItems)
		switch {
		case i < len(s.PrefixItems):
			subs = append(subs, s.PrefixItems[i])
		default:
			subs = append(subs, s.Items2020)
		}
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			subs = append(subs, items)
		case []*jsonschema.Schema:
			if i < len(items) {
				subs = append(subs, items[i])
			} else {
				subs = appendSchema(subs, s.AdditionalItems)
			}
		}
	}
	return subs
}
