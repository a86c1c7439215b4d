// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { Code, ConnectError, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { requireCore, type PluginHandler } from "./auth.js";
import { listenPort, type Environment } from "./env.js";
import { ConnectorService } from "./gen/openfief/connector/v1/connector_pb.js";
import { ViewService } from "./gen/openfief/view/v1/view_pb.js";
import { PluginServer } from "./server.js";
import { newCoreVerifier, type CoreVerifier } from "./verifier.js";

/**
 * Bounds one message the connector server reads, such as one ImportFile
 * chunk. receiveFile's limit bounds the whole file.
 */
export const MAX_MESSAGE_BYTES = 4 << 20;

/**
 * Bounds one page the view server reads: the core's pages hold a bounded
 * number of entries, each bounded by the store's validation.
 */
export const MAX_VIEW_MESSAGE_BYTES = 16 << 20;

/**
 * How long serveConnector and serveView let calls in flight finish after
 * they are told to stop, before they close their connections (the core
 * retries a batch whose call was cut), in milliseconds.
 */
export const DRAIN_TIMEOUT_MS = 20_000;

/** A connector's implementation of ConnectorService: Sync and ImportFile. */
export type ConnectorHandler = Partial<ServiceImpl<typeof ConnectorService>>;

/** A view's implementation of ViewService: Export. */
export type ViewHandler = Partial<ServiceImpl<typeof ViewService>>;

/** Options of the servers; the limits default to the SDK's. */
export interface ServerOptions {
  /** Bound on one message read, in bytes. */
  readMaxBytes?: number;
  /** Connect interceptors, run after the token check. */
  interceptors?: Interceptor[];
  /**
   * How long a connection without a call in flight is kept, in
   * milliseconds; two minutes by default. A call in flight is never cut for
   * being quiet.
   */
  idleTimeoutMs?: number;
}

/**
 * Returns the server a connector serves the core with: the ConnectorService
 * routes for handler, behind requireCore with verifier, speaking HTTP/1.1 and
 * HTTP/2 without TLS (h2c), since ImportFile streams. It serves Connect, gRPC
 * and gRPC-Web. A null verifier refuses every call.
 */
export function createConnectorServer(
  handler: ConnectorHandler,
  verifier: CoreVerifier | null,
  options: ServerOptions = {},
): PluginServer {
  return pluginServer(verifier, options, MAX_MESSAGE_BYTES, (router) =>
    router.service(ConnectorService, handler),
  );
}

/**
 * Returns the server a view serves the core with: the ViewService routes for
 * handler behind requireCore with verifier, as createConnectorServer does for
 * a connector. A null verifier refuses every call.
 */
export function createViewServer(
  handler: ViewHandler,
  verifier: CoreVerifier | null,
  options: ServerOptions = {},
): PluginServer {
  return pluginServer(verifier, options, MAX_VIEW_MESSAGE_BYTES, (router) =>
    router.service(ViewService, handler),
  );
}

/** The longest message of a plain error that plainErrors passes on. */
const MAX_ERROR_MESSAGE = 1024;

/**
 * plainErrors passes what a plain (non-Connect) error thrown by a handler
 * says on to the core, with Code.Unknown, as connect-go does for a Go
 * plugin's error; Connect-ES alone would answer a bare "internal error", and
 * the core's status could not say why a sync failed. A ConnectError passes
 * as it is. The SDK's own errors never hold a token.
 */
const plainErrors: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (e) {
    if (e instanceof ConnectError) throw e;
    const message = e instanceof Error ? e.message : String(e);
    throw new ConnectError(message.slice(0, MAX_ERROR_MESSAGE), Code.Unknown);
  }
};

function pluginServer(
  verifier: CoreVerifier | null,
  options: ServerOptions,
  defaultMax: number,
  routes: Parameters<typeof connectNodeAdapter>[0]["routes"],
): PluginServer {
  const adapter = connectNodeAdapter({
    routes,
    readMaxBytes: options.readMaxBytes ?? defaultMax,
    interceptors: [plainErrors, ...(options.interceptors ?? [])],
  }) as PluginHandler;
  return new PluginServer(requireCore(verifier, adapter), { idleTimeoutMs: options.idleTimeoutMs });
}

/** Options of serveConnector and serveView. */
export interface ServeOptions extends ServerOptions {
  /**
   * Stops the server when aborted. Without one, SIGTERM and SIGINT stop it,
   * as the kubelet stops a pod.
   */
  signal?: AbortSignal;
  /** The environment to read; process.env by default. */
  env?: Record<string, string | undefined>;
  /** The verifier; by default newCoreVerifier() from the environment. */
  verifier?: CoreVerifier;
  /** The drain timeout in milliseconds; DRAIN_TIMEOUT_MS by default. */
  drainMs?: number;
}

/**
 * A connector's whole serving side: it reads the listen port, builds the
 * core verifier, serves handler with createConnectorServer until the signal
 * (or SIGTERM) stops it, then stops taking calls and lets those in flight
 * finish for up to DRAIN_TIMEOUT_MS. It resolves after a clean drain.
 */
export async function serveConnector(
  handler: ConnectorHandler,
  options: ServeOptions = {},
): Promise<void> {
  const env: Environment = options.env ?? process.env;
  const port = listenPort(env);
  const verifier = options.verifier ?? newCoreVerifier(env);
  await run(createConnectorServer(handler, verifier, options), port, options);
}

/**
 * A view's whole serving side, as serveConnector is a connector's. A page
 * cut by the drain is sent again by the core: it moves the view's place only
 * after an OK.
 */
export async function serveView(handler: ViewHandler, options: ServeOptions = {}): Promise<void> {
  const env: Environment = options.env ?? process.env;
  const port = listenPort(env);
  const verifier = options.verifier ?? newCoreVerifier(env);
  await run(createViewServer(handler, verifier, options), port, options);
}

async function run(server: PluginServer, port: number, options: ServeOptions): Promise<void> {
  const { signal, release } = stopSignal(options.signal);
  try {
    await server.listen(port);
    if (!signal.aborted) {
      await new Promise<void>((resolve) =>
        signal.addEventListener("abort", () => resolve(), { once: true }),
      );
    }
    await server.close(options.drainMs ?? DRAIN_TIMEOUT_MS);
  } finally {
    release();
  }
}

/** The given signal, or one SIGTERM and SIGINT abort. */
function stopSignal(given: AbortSignal | undefined): { signal: AbortSignal; release: () => void } {
  if (given !== undefined) return { signal: given, release: () => {} };
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  return {
    signal: ac.signal,
    release: () => {
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
    },
  };
}
