// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// Package openfief is the Go SDK for OpenFief plugins: it serves the connector
// and view contracts to the core, verifies the core's per-instance token and
// reaches institutions through the egress proxy.
//
// A connector implements the generated
// connectorv1connect.ConnectorServiceHandler (package
// github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1) and
// hands it to ServeConnector, which is its whole serving side: it reads the
// environment the operator sets, serves Connect, gRPC and gRPC-Web over
// HTTP/1.1 and HTTP/2 without TLS, refuses with 401 every call whose bearer
// token the core did not send for this instance, and drains calls in flight
// when the pod stops.
//
// A view implements viewv1connect.ViewServiceHandler (package
// github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1) and hands it to
// ServeView, the same serving side for the view contract: the core sends it
// the record, a page at a time, and moves the view's place only once Export
// answered OK, so a view answers OK only once it has kept the page.
//
// The pieces, each usable on its own:
//
//   - Environment: CoreURL, ListenAddress and LoadConfig.
//   - Secrets: SecretDir, the directory to read a granted Secret's files
//     from, given the manifest's mount path. In a pod that is the mount
//     path; a runner that starts the plugin outside a pod (openfief dev
//     --local-plugins) sets OPENFIEF_SECRETS_ROOT and writes the files
//     under it. Read them on every use if the Secret may be rotated.
//   - Tokens: TokenFile reads a projected token on every call, through an
//     os.Root of its directory, because the kubelet rotates it.
//   - Serving: NewConnectorServer, NewViewServer, RequireCore,
//     InstanceAudience and ReceiveFile for ImportFile streams; Listen, the
//     listener ServeConnector and ServeView serve on. In a pod that is the
//     port of ListenAddress; a runner that starts the plugin outside a pod
//     (openfief dev --local-plugins) holds the listener itself and hands it
//     down as a descriptor named by OPENFIEF_LISTEN_FD, so that no other
//     process of the machine can take the port.
//   - Verifying the core: CoreVerifier, NewCoreVerifier and JWKSVerifier,
//     with go-jose v4 against the keys the operator publishes.
//   - Calling the core: CoreHTTPClient, which sends the openfief-core token
//     and never uses a proxy.
//   - Reaching an institution: NewEgressClient and EgressTransport, which
//     authenticate to the egress proxy with the openfief-egress token and
//     refuse plain http.
//
// No function of the package logs, and no error it returns contains a token.
//
// The SDK is licensed Apache-2.0 and imports nothing from the AGPL core.
package openfief
