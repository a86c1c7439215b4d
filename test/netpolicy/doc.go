// Package netpolicy is the platform's isolation truth table: named
// cells such as "plugin → cluster DNS, UDP 53: refused" or "core → plugin
// serving port: allowed", each computed from NetworkPolicy objects by a
// reference engine, the policy matcher of mattfenwick/cyclonus (the tool
// sig-network uses to check CNIs), and compared cell by cell with the
// expected table written here.
//
// The fast test computes the table from the objects the platform really
// produces: the plugin NetworkPolicies the operator's BuildObjects compiles
// for two plugins, and the install manifests deploy/operator,
// deploy/egress-proxy and deploy/core rendered with deploy.Render (the
// namespace-wide default deny and the proxy's and the core's own policies). A
// real-node test runs the same Cells on real packets and diffs its Table
// against Compute's, so a CNI that disagrees with the engine, or policies
// that disagree with the expectation, fail naming the cell (D-32, D-59).
//
// The package is for tests only: it links cyclonus, whose matcher package
// compiles ginkgo and gomega into non-test code, so no binary may import it
// (a depguard rule in .golangci.yml).
package netpolicy
