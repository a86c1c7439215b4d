// Package openfief is the Go SDK for OpenFief plugins: it serves the connector
// contract to the core, verifies the core's per-instance token (D-59) and
// reaches institutions through the egress proxy (D-63).
//
// The SDK is licensed Apache-2.0 and imports nothing from the AGPL core (D-5).
package openfief
