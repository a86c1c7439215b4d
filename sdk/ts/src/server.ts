// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { once } from "node:events";
import { createServer as createHTTP1Server, type ServerResponse } from "node:http";
import { createServer as createHTTP2Server, type Http2Session, type Http2Stream } from "node:http2";
import { createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { Code, ConnectError, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { requireCore, type PluginHandler } from "./auth.js";
import { ConnectorService } from "./gen/openfief/connector/v1/connector_pb.js";
import { ViewService } from "./gen/openfief/view/v1/view_pb.js";
import type { CoreVerifier } from "./verifier.js";

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

/** How long a connection may take to send its request's headers. */
const READ_HEADER_TIMEOUT_MS = 10_000;

/** How long an idle connection is kept open. */
const IDLE_TIMEOUT_MS = 120_000;

/** What an HTTP/2 client sends first on a connection without TLS (prior knowledge). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * PluginServer serves one handler over HTTP/1.1 and HTTP/2 without TLS (h2c,
 * prior knowledge) on one port, as the Go SDK's server does: it reads the
 * first bytes of every connection and hands it to Node's HTTP/2 server when
 * they are the HTTP/2 preface, to its HTTP/1.1 server otherwise.
 */
export class PluginServer {
  private readonly listener = createNetServer((socket) => this.accept(socket));
  private readonly http1;
  private readonly http2;
  private readonly sockets = new Set<Socket>();
  private readonly sniffing = new Set<Socket>();
  private readonly sessions = new Set<Http2Session>();
  /** HTTP/1.1 connections and how many of their requests are unanswered. */
  private readonly http1Active = new Map<Socket, number>();
  private draining = false;

  private readonly idleTimeoutMs: number;

  /**
   * Serves handler; nothing is listened on until listen. idleTimeoutMs is
   * how long a connection without a call in flight is kept (two minutes by
   * default).
   */
  constructor(handler: PluginHandler, options: { idleTimeoutMs?: number } = {}) {
    this.idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    const wrapped: PluginHandler = (req, res) => {
      if (req.httpVersionMajor === 1) {
        const socket = req.socket;
        this.http1Active.set(socket, (this.http1Active.get(socket) ?? 0) + 1);
        if (this.draining) {
          // Close the connection once this response is sent.
          (res as ServerResponse).shouldKeepAlive = false;
        }
        res.once("close", () => {
          const n = (this.http1Active.get(socket) ?? 1) - 1;
          this.http1Active.set(socket, n);
          if (this.draining && n === 0) socket.end();
        });
      }
      handler(req, res);
    };
    this.http1 = createHTTP1Server(
      {
        headersTimeout: READ_HEADER_TIMEOUT_MS,
        requestTimeout: 0,
        keepAliveTimeout: this.idleTimeoutMs,
      },
      wrapped,
    );
    this.http2 = createHTTP2Server({}, wrapped);
    this.http2.on("session", (session: Http2Session) => {
      this.sessions.add(session);
      const idle = idleCloser(session, this.idleTimeoutMs);
      session.once("close", () => {
        idle.stop();
        this.sessions.delete(session);
      });
      if (this.draining) session.close();
    });
  }

  /**
   * Listens on port (0 picks a free one) of host, or of every address when
   * host is undefined, and resolves with the address.
   */
  async listen(port: number, host?: string): Promise<AddressInfo> {
    this.listener.listen({ port, host });
    await once(this.listener, "listening");
    return this.listener.address() as AddressInfo;
  }

  /** The address listened on, once listening. */
  address(): AddressInfo {
    return this.listener.address() as AddressInfo;
  }

  /**
   * Stops taking connections and lets the calls in flight finish for up to
   * drainMs milliseconds, then closes whatever is still open and rejects.
   * Resolves after a clean drain.
   */
  async close(drainMs: number): Promise<void> {
    this.draining = true;
    this.listener.close();
    for (const s of this.sniffing) s.destroy();
    for (const session of this.sessions) session.close();
    for (const [socket, n] of this.http1Active) if (n === 0) socket.end();
    if (this.sockets.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const drained = new Promise<boolean>((resolve) => {
      this.onEmpty = () => resolve(true);
      timer = setTimeout(() => resolve(false), drainMs);
    });
    const clean = await drained;
    clearTimeout(timer);
    this.onEmpty = undefined;
    if (!clean) {
      for (const s of this.sockets) s.destroy();
      throw new Error(`drain calls in flight: not done after ${drainMs} ms`);
    }
  }

  private onEmpty: (() => void) | undefined;

  private accept(socket: Socket): void {
    if (this.draining) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    this.sniffing.add(socket);
    socket.once("close", () => {
      this.sockets.delete(socket);
      this.sniffing.delete(socket);
      this.http1Active.delete(socket);
      if (this.sockets.size === 0) this.onEmpty?.();
    });
    socket.on("error", () => socket.destroy());
    socket.setTimeout(READ_HEADER_TIMEOUT_MS, () => {
      if (this.sniffing.has(socket)) socket.destroy();
    });
    let seen = Buffer.alloc(0);
    const onReadable = () => {
      let chunk: Buffer | null;
      while ((chunk = socket.read() as Buffer | null) !== null) {
        seen = Buffer.concat([seen, chunk]);
      }
      const n = Math.min(seen.length, H2_PREFACE.length);
      const isH2 = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && seen.length < H2_PREFACE.length) return; // need more bytes
      socket.off("readable", onReadable);
      this.sniffing.delete(socket);
      socket.setTimeout(0);
      socket.unshift(seen);
      if (isH2) {
        this.http2.emit("connection", socket);
      } else {
        this.http1Active.set(socket, 0);
        this.http1.emit("connection", socket);
      }
    };
    socket.on("readable", onReadable);
  }
}

/**
 * Closes an HTTP/2 session once it has had no open stream for the idle
 * timeout. A stream that is open but quiet, such as a Sync waiting for its
 * institution, keeps the session: only idleness between calls counts, as in
 * the Go SDK's server.
 */
function idleCloser(session: Http2Session, idleMs: number): { stop: () => void } {
  let open = 0;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => session.close(), idleMs);
    timer.unref();
  };
  session.on("stream", (stream: Http2Stream) => {
    open++;
    clearTimeout(timer);
    stream.once("close", () => {
      if (--open === 0) arm();
    });
  });
  arm();
  return { stop: () => clearTimeout(timer) };
}
