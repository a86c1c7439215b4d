// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { Agent, request as httpsRequest, type AgentOptions, type RequestOptions } from "node:https";
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { connect as netConnect, isIP, type Socket } from "node:net";
import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import type { Duplex } from "node:stream";
import { Env, type Environment } from "./env.js";
import { TokenFile } from "./tokenfile.js";

/**
 * The user name the SDK sends to the egress proxy; the password is the
 * plugin's current openfief-egress token.
 */
export const EGRESS_PROXY_USER = "plugin";

/** Bounds the egress proxy's answer to a CONNECT, headers included. */
const MAX_CONNECT_RESPONSE_BYTES = 16 << 10;

/** How long reaching the proxy and its answer to CONNECT may take. */
const TUNNEL_TIMEOUT_MS = 30_000;

/** How long a whole egress request may take by default, as the Go SDK's client. */
const DEFAULT_TIMEOUT_MS = 5 * 60_000;

/** Bounds a response body EgressClient.request reads by default. */
export const DEFAULT_MAX_RESPONSE_BYTES = 32 << 20;

/**
 * EgressError is every refusal of the egress client; its message never
 * contains a token. code says which:
 *
 * - no_proxy: no proxy is configured (HTTPS_PROXY unset): the plugin was
 *   granted no egress host, so it may reach no institution;
 * - plain_http: a URL that is not https; institutions are reached only over
 *   HTTPS, through the proxy's CONNECT tunnel;
 * - proxy_refused: the proxy answered the CONNECT with another status than 200;
 * - proxy_protocol: the proxy's answer was not HTTP or was too large;
 * - too_large: a response body over the request's limit.
 */
export class EgressError extends Error {
  override name = "EgressError";
  constructor(
    readonly code: "no_proxy" | "plain_http" | "proxy_refused" | "proxy_protocol" | "too_large",
    message: string,
    /** The proxy's status for proxy_refused. */
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * Accepts an http or https proxy URL with a host and nothing the SDK would
 * override or drop: no user info, path, query or fragment.
 * @internal
 */
export function parseProxyURL(raw: string): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new Error("not a URL");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new Error(`scheme ${JSON.stringify(u.protocol.replace(/:$/, ""))} is not http or https`);
  }
  if (u.hostname === "") throw new Error("no host");
  if (u.username !== "" || u.password !== "" || /^[a-z]+:\/\/[^/]*@/i.test(raw)) {
    throw new Error("must not carry user info");
  }
  if ((u.pathname !== "" && u.pathname !== "/") || u.search !== "" || u.hash !== "") {
    throw new Error("must not have a path, query or fragment");
  }
  return new URL(`${u.protocol}//${u.host}`);
}

/**
 * EgressAgent is an https.Agent that opens every connection as a tunnel
 * through the egress proxy: an HTTP CONNECT to the target's host and port,
 * authenticated with Basic Proxy-Authorization of user "plugin" and the egress
 * token the file holds at that moment, then TLS to the target inside the
 * tunnel. Tunnels are not kept alive, so a rotated token is used by the next
 * request. Use it with https.request; a plain http request has no agent to
 * go through and is refused by EgressClient.
 */
export class EgressAgent extends Agent {
  constructor(
    private readonly proxy: URL | null,
    private readonly tokens: TokenFile,
    options: AgentOptions = {},
  ) {
    super({ ...options, keepAlive: false });
  }

  /** Opens the tunnel and the TLS connection inside it. */
  override createConnection(
    options: ConnectionOptions & { host?: string | null; port?: number | string | null },
    callback: (err: Error | null, socket?: Duplex) => void,
  ): undefined {
    this.tunnel(options).then(
      (socket) => callback(null, socket),
      (err: Error) => callback(err),
    );
    return undefined;
  }

  private async tunnel(
    options: ConnectionOptions & { host?: string | null; port?: number | string | null },
  ): Promise<Duplex> {
    if (this.proxy === null) {
      throw new EgressError("no_proxy", "egress: no proxy configured (HTTPS_PROXY unset)");
    }
    let token: string;
    try {
      token = await this.tokens.read();
    } catch (e) {
      throw new Error(`egress: ${(e as Error).message}`);
    }
    const host = options.host ?? "localhost";
    const port = Number(options.port ?? 443);
    const raw = await connectProxy(this.proxy);
    try {
      const target = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
      const auth = Buffer.from(`${EGRESS_PROXY_USER}:${token}`, "latin1").toString("base64");
      raw.write(
        `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`,
      );
      const rest = await readConnectResponse(raw);
      // The tunnel is open: from here the request's own timeout counts.
      raw.setTimeout(0);
      raw.removeAllListeners("timeout");
      if (rest.length > 0) raw.unshift(rest);
    } catch (e) {
      raw.destroy();
      throw e;
    }
    const servername = options.servername ?? (isIP(host) === 0 ? host : undefined);
    const tlsOptions: ConnectionOptions = { ...options, socket: raw };
    delete (tlsOptions as { host?: unknown }).host;
    delete (tlsOptions as { port?: unknown }).port;
    delete (tlsOptions as { path?: unknown }).path;
    if (servername !== undefined) tlsOptions.servername = servername;
    else delete tlsOptions.servername;
    const tls = tlsConnect(tlsOptions);
    return tls;
  }
}

/** Connects to the proxy itself, over TLS when its URL is https. */
async function connectProxy(proxy: URL): Promise<Socket> {
  const host = proxy.hostname.replace(/^\[|\]$/g, "");
  const port = Number(proxy.port || (proxy.protocol === "https:" ? 443 : 80));
  return await new Promise<Socket>((resolve, reject) => {
    const s =
      proxy.protocol === "https:"
        ? tlsConnect({ host, port, servername: isIP(host) === 0 ? host : undefined }, () =>
            done(null),
          )
        : netConnect({ host, port }, () => done(null));
    // A proxy that does not take the connection or answer the CONNECT in
    // time does not hold the request.
    s.setTimeout(TUNNEL_TIMEOUT_MS, () =>
      s.destroy(new EgressError("proxy_protocol", "egress: the proxy did not answer in time")),
    );
    const done = (err: Error | null) => {
      s.off("error", done);
      if (err !== null) reject(new Error(`egress: connect to the proxy: ${err.message}`));
      else resolve(s);
    };
    s.once("error", done);
  });
}

/**
 * Reads the proxy's answer to CONNECT, bounded; resolves with the bytes
 * after its headers when the status is 200, rejects otherwise. The proxy's
 * words are never put in the error: only its status.
 */
async function readConnectResponse(s: Duplex): Promise<Buffer> {
  let seen = Buffer.alloc(0);
  for (;;) {
    const end = seen.indexOf("\r\n\r\n");
    if (end >= 0) {
      const status = /^HTTP\/1\.[01] ([0-9]{3})(?: |\r)/.exec(
        seen.subarray(0, end + 2).toString("latin1"),
      );
      if (!status)
        throw new EgressError("proxy_protocol", "egress: the proxy did not answer with HTTP");
      const code = Number(status[1]);
      if (code !== 200) {
        throw new EgressError(
          "proxy_refused",
          `egress: the proxy refused the tunnel with status ${code}`,
          code,
        );
      }
      return seen.subarray(end + 4);
    }
    if (seen.length > MAX_CONNECT_RESPONSE_BYTES) {
      throw new EgressError("proxy_protocol", "egress: the proxy's answer is too large");
    }
    const chunk = await readChunk(s);
    if (chunk === null) {
      throw new EgressError("proxy_protocol", "egress: the proxy closed the connection");
    }
    seen = Buffer.concat([seen, chunk]);
  }
}

function readChunk(s: Duplex): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      s.off("data", onData);
      s.off("end", onEnd);
      s.off("close", onEnd);
      s.off("error", onError);
    };
    const onData = (b: Buffer) => {
      cleanup();
      s.pause();
      resolve(b);
    };
    const onEnd = () => {
      cleanup();
      resolve(null);
    };
    const onError = (e: Error) => {
      cleanup();
      reject(new Error(`egress: the proxy connection failed: ${e.message}`));
    };
    s.on("data", onData);
    s.once("end", onEnd);
    s.once("close", onEnd);
    s.once("error", onError);
    s.resume();
  });
}

/** One request of EgressClient.request. */
export interface EgressRequest {
  method?: string;
  headers?: OutgoingHttpHeaders;
  body?: string | Uint8Array;
  /** Bound on the response body, in bytes; DEFAULT_MAX_RESPONSE_BYTES by default. */
  maxResponseBytes?: number;
  /** Bound on the whole request, in milliseconds; five minutes by default. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Extra TLS options for the target, such as ca for a private CA. */
  tls?: Pick<RequestOptions, "ca" | "servername">;
}

/** The answer to one EgressClient.request. Redirects are never followed. */
export interface EgressResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * EgressClient is how a plugin reaches its institutions: every request goes
 * over HTTPS through the egress proxy's CONNECT tunnel, with the egress
 * token; a URL that is not https is refused before anything is sent, and
 * without a proxy nothing is sent at all.
 */
export class EgressClient {
  /** The agent every request goes through; pass it to other HTTPS clients. */
  readonly agent: EgressAgent;

  /** A client for proxy with the egress token in tokens; a null proxy refuses everything. */
  constructor(
    private readonly proxy: URL | null,
    tokens: TokenFile,
  ) {
    this.agent = new EgressAgent(proxy, tokens);
  }

  /** Sends one request and reads its whole answer, bounded. */
  async request(url: string | URL, req: EgressRequest = {}): Promise<EgressResponse> {
    const u = new URL(url);
    if (u.protocol !== "https:") {
      throw new EgressError("plain_http", "egress: only https URLs may be fetched");
    }
    if (this.proxy === null) {
      throw new EgressError("no_proxy", "egress: no proxy configured (HTTPS_PROXY unset)");
    }
    const limit = req.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const signals = [AbortSignal.timeout(req.timeoutMs ?? DEFAULT_TIMEOUT_MS)];
    if (req.signal) signals.push(req.signal);
    const signal = AbortSignal.any(signals);
    return await new Promise<EgressResponse>((resolve, reject) => {
      const r = httpsRequest(
        u,
        {
          method: req.method ?? "GET",
          headers: req.headers,
          agent: this.agent,
          signal,
          ...req.tls,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (b: Buffer) => {
            size += b.length;
            if (size > limit) {
              res.destroy();
              r.destroy();
              reject(
                new EgressError("too_large", `egress: the response is larger than ${limit} bytes`),
              );
              return;
            }
            chunks.push(b);
          });
          res.once("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks, size),
            }),
          );
          res.once("error", reject);
        },
      );
      r.once("error", reject);
      r.end(req.body);
    });
  }

  /** Closes what the agent holds open. */
  close(): void {
    this.agent.destroy();
  }
}

/**
 * Returns the client a plugin reaches its institutions with: for the proxy
 * in HTTPS_PROXY and the token file in OPENFIEF_EGRESS_TOKEN_FILE. It throws
 * an EgressError "no_proxy" when HTTPS_PROXY is unset.
 */
export function newEgressClient(env: Environment = process.env): EgressClient {
  const raw = env[Env.HTTPSProxy] ?? "";
  if (raw === "") {
    throw new EgressError("no_proxy", "egress: no proxy configured (HTTPS_PROXY unset)");
  }
  let proxy: URL;
  try {
    proxy = parseProxyURL(raw);
  } catch (e) {
    throw new Error(`${Env.HTTPSProxy}: ${(e as Error).message}`);
  }
  const path = env[Env.EgressTokenFile] ?? "";
  if (path === "") throw new Error(`egress: ${Env.EgressTokenFile} unset`);
  return new EgressClient(proxy, new TokenFile(path));
}
