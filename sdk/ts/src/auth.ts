// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { CoreVerifier } from "./verifier.js";

/** A request of either HTTP version, as Node's servers hand it to a handler. */
export type PluginRequest = IncomingMessage | Http2ServerRequest;

/** A response of either HTTP version. */
export type PluginResponse = ServerResponse | Http2ServerResponse;

/** A handler of either HTTP version, such as the one connectNodeAdapter returns. */
export type PluginHandler = (req: PluginRequest, res: PluginResponse) => void;

/**
 * Lets through only requests whose "Authorization: Bearer" token verifier
 * accepts, the core's token for this instance; every other request gets 401
 * before next sees it. The response never says why, and nothing is logged. A
 * null verifier refuses every request.
 */
export function requireCore(verifier: CoreVerifier | null, next: PluginHandler): PluginHandler {
  return (req, res) => {
    const token = bearerToken(req.rawHeaders);
    if (token === undefined || verifier === null) {
      unauthenticated(res);
      return;
    }
    verifier.verify(token).then(
      () => {
        try {
          next(req, res);
        } catch {
          // A handler that throws gets its stream cut, never an answer it
          // did not write.
          res.destroy();
        }
      },
      () => unauthenticated(res),
    );
  };
}

function unauthenticated(res: PluginResponse): void {
  const body = "unauthenticated\n";
  // Both response types take the same writeHead and end; their overloads
  // differ only in what they return.
  const r = res as ServerResponse;
  r.writeHead(401, {
    "www-authenticate": 'Bearer realm="openfief-plugin"',
    "content-type": "text/plain; charset=utf-8",
    "x-content-type-options": "nosniff",
    "content-length": Buffer.byteLength(body),
  });
  r.end(body);
}

/**
 * Returns the token of the request's single Authorization header when it
 * uses the Bearer scheme. Node keeps only the first of repeated Authorization
 * headers in req.headers, so they are counted in the raw list.
 */
export function bearerToken(rawHeaders: readonly string[]): string | undefined {
  let value: string | undefined;
  let count = 0;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() === "authorization") {
      count++;
      value = rawHeaders[i + 1];
    }
  }
  if (count !== 1 || value === undefined) return undefined;
  const sp = value.indexOf(" ");
  if (sp < 0 || value.slice(0, sp).toLowerCase() !== "bearer") return undefined;
  const token = value.slice(sp + 1).replace(/^[\t\n\v\f\r ]+|[\t\n\v\f\r ]+$/g, "");
  return token === "" ? undefined : token;
}
