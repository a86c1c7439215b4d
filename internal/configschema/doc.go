// Package configschema validates a Plugin's config against the JSON Schema
// its manifest declares (D-11), with the bounds that keep a hostile schema
// from reaching outside itself or costing unbounded work. The operator and
// the owner's CLI both call Validate, so an install is refused for the same
// reason the operator would refuse it.
package configschema
