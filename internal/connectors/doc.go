// Package connectors holds the adapters of OpenFief's first-party connector
// plugins, one package per institution (D-49). Each adapter implements the
// generated connectorv1connect.ConnectorServiceHandler with the Go SDK
// (github.com/arkadiuss/openfief/sdk/go) and its delivery helper; the thin
// main in plugins/<name> only loads the config, builds the SDK's egress
// client and serves the adapter with openfief.ServeConnector. What the
// adapters share sits in this package (ParseBaseURL), and connectortest
// serves an adapter with the SDK's real server for its tests.
//
// The adapters live here, in the AGPL core module, rather than in the
// Apache-2.0 SDK module: they are the project's own plugins, not something
// a third-party plugin author builds on, and keeping them under internal/
// keeps them out of any API promise (D-5).
package connectors
