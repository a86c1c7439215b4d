// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { coreURL, type Environment } from "./env.js";
import { coreTokenFile, type TokenFile } from "./tokenfile.js";

/**
 * CoreClient calls the core's API with the plugin's openfief-core token: it
 * sends the token the file holds now as "Authorization: Bearer" on every
 * request, reaches the core directly (Node's fetch uses no proxy), refuses
 * any URL whose origin is not the core's, so the core token goes nowhere
 * else, and never follows a redirect.
 */
export class CoreClient {
  constructor(
    /** The core's base URL, http://<ClusterIP>:<port>. */
    readonly base: URL,
    private readonly tokens: TokenFile,
  ) {}

  /** Sends a request for path (or a URL of the core) with the current core token. */
  async fetch(path: string | URL, init: RequestInit = {}): Promise<Response> {
    const u = new URL(path, this.base);
    if (u.origin !== this.base.origin) {
      throw new Error("core client: request is not for the core");
    }
    let token: string;
    try {
      token = await this.tokens.read();
    } catch (e) {
      throw new Error(`core client: ${(e as Error).message}`);
    }
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${token}`);
    return await fetch(u, {
      ...init,
      headers,
      redirect: "error",
      signal: init.signal ?? AbortSignal.timeout(5 * 60_000),
    });
  }
}

/**
 * Returns a CoreClient for the core at OPENFIEF_CORE_ADDRESS with the token
 * file in OPENFIEF_TOKEN_FILE, or the default token path.
 */
export function newCoreClient(env: Environment = process.env): CoreClient {
  return new CoreClient(coreURL(env), coreTokenFile(env));
}
