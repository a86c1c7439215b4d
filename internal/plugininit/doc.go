// Package plugininit writes a new plugin project for a vendor, as `openfief
// plugin init` does: a connector or a view, in Go or TypeScript, with its
// manifest.json, a test that calls it through the SDK's server, a
// multi-stage Dockerfile that carries the manifest label, and a README with
// the next steps.
//
// The projects are made from skeleton/, embedded in the binary. Its source
// files are real programs: the Go skeletons are packages of this module, so
// `go vet`, the linters and `go test` check them where they are, and the
// tests of this package write each project and build and test it as a
// vendor would. Files named *.tmpl are text/template documents given the
// project's Options; a leading "dot-" becomes "." (go:embed leaves out dot
// files).
package plugininit
