package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// RulesFile is the PrometheusRule of deploy/monitoring, from the
// repository's root.
const RulesFile = "deploy/monitoring/prometheusrule.yaml"

// Rule is one alerting or recording rule of a PrometheusRule.
type Rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Rules reads every rule of deploy/monitoring's PrometheusRule.
func Rules() ([]Rule, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, RulesFile))
	if err != nil {
		return nil, err
	}
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []Rule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &pr, yaml.DisallowUnknownFields); err != nil {
		return nil, fmt.Errorf("%s: %w", RulesFile, err)
	}
	if pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: kind %q, want PrometheusRule", RulesFile, pr.Kind)
	}
	var out []Rule
	for _, g := range pr.Spec.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// RuleMetricNames are the metric names the rules of deploy/monitoring read,
// sorted, each once.
func RuleMetricNames() ([]string, error) {
	rules, err := Rules()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range rules {
		names = append(names, MetricNames(r.Expr)...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

var (
	// promStrings are PromQL's string literals.
	promStrings = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// promGroupings are the label lists of aggregations and vector
	// matching: by (...), without (...), on (...), ignoring (...),
	// group_left (...), group_right (...).
	promGroupings = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// promMatchers are selectors' label matchers and range brackets.
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	// promIdent is an identifier; MetricNames skips those inside a number
	// ("5m", "1e3").
	promIdent = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// promKeywords are PromQL's operators and keywords written as words.
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end",
		"by", "without", "on", "ignoring", "group_left", "group_right"}
)

// MetricNames are the metric names a valid PromQL expression selects: what
// remains once strings, label matchers, range brackets and grouping lists
// are taken out, of the identifiers that are neither a function's or an
// aggregation's name (followed by "(") nor a keyword. The tests give its
// result to promtool's parser's judgement: the rules are checked by
// promtool check rules.
func MetricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promGroupings.ReplaceAllString(e, " ")
	e = promMatchers.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		if loc[0] > 0 && strings.ContainsRune("0123456789.", rune(e[loc[0]-1])) {
			continue // the exponent or unit of a number
		}
		name := e[loc[0]:loc[1]]
		call := strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "(")
		if call || slices.Contains(promKeywords, strings.ToLower(name)) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
