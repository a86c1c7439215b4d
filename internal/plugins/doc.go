// Package plugins is OpenFief's pure plugin domain: it decides what a plugin
// may do and never does anything itself. It validates the vendor's Plugin and
// the owner's PluginGrant, parses image references, computes effective
// permissions (D-16), plans which version runs (D-47), compiles a Workload
// (D-11, D-32, D-63), decides image trust (D-42, D-43, D-44, D-45, D-57) and
// encodes the egress allow-lists.
//
// The package has no I/O, no Kubernetes types, no clock and no globals:
// adapters (the operator, the egress proxy, the CLI) translate the world into
// these values and act on the answers.
package plugins
