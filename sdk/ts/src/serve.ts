// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { listenPort, type Environment } from "./env.js";
import {
  createConnectorServer,
  createViewServer,
  type ConnectorHandler,
  type PluginServer,
  type ServerOptions,
  type ViewHandler,
} from "./server.js";
import { newCoreVerifier, type CoreVerifier } from "./verifier.js";

/**
 * How long serveConnector and serveView let calls in flight finish after
 * they are told to stop, before they close their connections (the core
 * retries a batch whose call was cut), in milliseconds.
 */
export const DRAIN_TIMEOUT_MS = 20_000;

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
