// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

/**
 * The TypeScript SDK for OpenFief plugins: it serves the connector and view
 * contracts to the core, verifies the core's per-instance token and reaches
 * institutions through the egress proxy, with the same rules as the Go SDK.
 *
 * - Environment: {@link coreURL}, {@link listenPort}, {@link loadConfig}.
 * - Tokens: {@link TokenFile} reads a projected token on every call.
 * - Serving: {@link serveConnector}, {@link serveView},
 *   {@link createConnectorServer}, {@link createViewServer},
 *   {@link requireCore}, {@link receiveFile} for ImportFile streams.
 * - Verifying the core: {@link JWKSVerifier}, {@link newCoreVerifier}.
 * - Calling the core: {@link CoreClient}.
 * - Reaching an institution: {@link EgressClient}, {@link EgressAgent}.
 *
 * The delivery helpers are in "@openfief/sdk/delivery", the contract's
 * messages in "@openfief/sdk/connector/v1" and "@openfief/sdk/view/v1".
 * No function of the package logs, and no error it throws contains a token.
 *
 * @module
 */
export { bearerToken, requireCore } from "./auth.js";
export type { PluginHandler, PluginRequest, PluginResponse } from "./auth.js";
export { CoreClient, newCoreClient } from "./core.js";
export {
  DEFAULT_LISTEN_PORT,
  DEFAULT_SA_JWKS_DIR,
  DEFAULT_TOKEN_PATH,
  Env,
  coreURL,
  listenPort,
  loadConfig,
} from "./env.js";
export type { Environment } from "./env.js";
export {
  DEFAULT_MAX_RESPONSE_BYTES,
  EGRESS_PROXY_USER,
  EgressAgent,
  EgressClient,
  EgressError,
  newEgressClient,
} from "./egress.js";
export type { EgressRequest, EgressResponse } from "./egress.js";
export { FILE_TOO_LARGE, receiveFile } from "./importfile.js";
export type { ReceivedFile } from "./importfile.js";
export { ALLOWED_ALGORITHMS } from "./keys.js";
export type { SigningAlgorithm } from "./keys.js";
export { DRAIN_TIMEOUT_MS, serveConnector, serveView } from "./serve.js";
export type { ServeOptions } from "./serve.js";
export {
  MAX_MESSAGE_BYTES,
  MAX_VIEW_MESSAGE_BYTES,
  PluginServer,
  createConnectorServer,
  createViewServer,
} from "./server.js";
export type { ConnectorHandler, ServerOptions, ViewHandler } from "./server.js";
export { TokenFile, coreTokenFile } from "./tokenfile.js";
export {
  ISSUER_FILE_NAME,
  JWKS_FILE_NAME,
  JWKSVerifier,
  LEEWAY_SECONDS,
  TokenRefusedError,
  instanceAudience,
  newCoreVerifier,
} from "./verifier.js";
export type { CoreVerifier, JWKSVerifierOptions, RefusalReason } from "./verifier.js";
