// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// Shared test helpers: key material, token signing, and a key directory laid
// out the way the kubelet writes a ConfigMap volume.

import assert from "node:assert/strict";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Code, ConnectError } from "@connectrpc/connect";
import { SignJWT, exportJWK } from "jose";
import { ISSUER_FILE_NAME, JWKS_FILE_NAME, instanceAudience } from "../src/index.js";

export const testIssuer = "https://kubernetes.default.svc.cluster.local";
export const testSubject = "system:serviceaccount:openfief:openfief-core";
export const testInstance = "nbp-fx";

/** The repository's sdk/ directory, from build/test/ or test/. */
export const sdkDir = fileURLToPath(new URL("../../../", import.meta.url));

/** The shared conformance vectors. */
export const conformanceDir = join(sdkDir, "testdata", "conformance");

/** The package's own directory, sdk/ts. */
export const packageDir = join(sdkDir, "ts");

/** A generated key pair with its key ID and algorithm. */
export interface TestKey {
  kid: string;
  alg: "RS256" | "ES256";
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export function newKey(kid: string, alg: "RS256" | "ES256"): TestKey {
  const pair =
    alg === "RS256"
      ? generateKeyPairSync("rsa", { modulusLength: 2048 })
      : generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { kid, alg, ...pair };
}

/** The key's public JWK as the API server publishes it. */
export async function publicJWK(k: TestKey): Promise<Record<string, unknown>> {
  return { ...(await exportJWK(k.publicKey)), kid: k.kid, alg: k.alg, use: "sig" };
}

/** A core token for instance signed by k, valid for ten minutes from now. */
export async function signToken(
  k: TestKey,
  opts: { instance?: string; subject?: string; issuer?: string; expiresIn?: number } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return await new SignJWT({})
    .setProtectedHeader({ alg: k.alg, kid: k.kid })
    .setIssuer(opts.issuer ?? testIssuer)
    .setSubject(opts.subject ?? testSubject)
    .setAudience([instanceAudience(opts.instance ?? testInstance)])
    .setIssuedAt(now - 60)
    .setNotBefore(now - 60)
    .setExpirationTime(now + (opts.expiresIn ?? 600))
    .sign(k.privateKey);
}

/** A temporary directory removed by cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "openfief-sdk-ts-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A directory laid out like a ConfigMap or projected volume: each file is a
 * link into ..data, itself a link to a generation directory that each update
 * replaces atomically.
 */
export class KubeletDir {
  private gen = 0;
  constructor(
    readonly dir: string,
    names: string[],
  ) {
    for (const name of names) symlinkSync(join("..data", name), join(dir, name));
  }

  /** Publishes a new generation holding files. */
  write(files: Record<string, string>): void {
    const gen = `..gen${++this.gen}`;
    mkdirSync(join(this.dir, gen));
    for (const [name, content] of Object.entries(files)) {
      writeFileSync(join(this.dir, gen, name), content);
    }
    const tmp = join(this.dir, "..data_tmp");
    symlinkSync(gen, tmp);
    renameSync(tmp, join(this.dir, "..data"));
  }
}

/** A key directory for the verifier, publishing issuer and keys. */
export async function jwksDir(dir: string, issuer: string, keys: TestKey[]): Promise<KubeletDir> {
  const d = new KubeletDir(dir, [JWKS_FILE_NAME, ISSUER_FILE_NAME]);
  await publishKeys(d, issuer, keys);
  return d;
}

export async function publishKeys(d: KubeletDir, issuer: string, keys: TestKey[]): Promise<void> {
  const jwks = JSON.stringify({ keys: await Promise.all(keys.map(publicJWK)) });
  d.write({ [JWKS_FILE_NAME]: jwks, [ISSUER_FILE_NAME]: issuer });
}

/** Resolves when cond holds, checking every 10 ms, or rejects after timeoutMs. */
export async function eventually(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A minimal HTTP CONNECT proxy on loopback, for the egress tests: see
 * egress.test.ts for why it is not the project's egress proxy.
 */
export class ConnectProxy {
  readonly server: Server;
  readonly connects: { target: string; auth: string | undefined }[] = [];
  connections = 0;
  refuse = false;

  /** Tunnels CONNECTs to host:443 to targetPort on loopback; refuses every other target. */
  constructor(
    private readonly targetPort: number,
    private readonly host: string,
  ) {
    this.server = createServer((s) => this.handle(s));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private handle(client: Socket): void {
    this.connections++;
    let head = Buffer.alloc(0);
    const onData = (b: Buffer) => {
      head = Buffer.concat([head, b]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      client.off("data", onData);
      const lines = head.subarray(0, end).toString("latin1").split("\r\n");
      const [method, target] = (lines[0] ?? "").split(" ");
      const auth = lines.find((l) => /^proxy-authorization:/i.test(l))?.replace(/^[^:]*:\s*/, "");
      if (method !== "CONNECT" || target === undefined) {
        client.end("HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n");
        return;
      }
      this.connects.push({ target, auth });
      if (this.refuse) {
        client.end(
          "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\nContent-Length: 19\r\n\r\nwords of the proxy!",
        );
        return;
      }
      if (target !== `${this.host}:443`) {
        client.end("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        return;
      }
      const upstream = connect(this.targetPort, "127.0.0.1", () => {
        client.write("HTTP/1.1 200 Connection established\r\n\r\n");
        const rest = head.subarray(end + 4);
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream).pipe(client);
      });
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
    };
    client.on("data", onData);
  }
}

/** The call options that send token as the bearer token. */
export function bearer(token: string): { headers: Record<string, string> } {
  return { headers: { authorization: `Bearer ${token}` } };
}

/** Waits for p and checks it fails with a ConnectError of code, which it returns. */
export async function refusedWith(p: Promise<unknown>, code: Code): Promise<ConnectError> {
  try {
    await p;
  } catch (e) {
    const err = ConnectError.from(e);
    assert.equal(Code[err.code], Code[code], err.message);
    return err;
  }
  assert.fail(`resolved, want ${Code[code]}`);
}

/** A small deterministic generator (xorshift). */
export function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** Replaces, inserts or deletes a few characters of s. */
export function mutate(s: string, next: () => number, alphabet: string): string {
  let out = s;
  const n = 1 + Math.floor(next() * 3);
  for (let i = 0; i < n; i++) {
    const at = Math.floor(next() * (out.length + 1));
    const c = alphabet[Math.floor(next() * alphabet.length)] ?? "";
    const op = next();
    if (op < 0.4) out = out.slice(0, at) + c + out.slice(at + 1);
    else if (op < 0.7) out = out.slice(0, at) + c + out.slice(at);
    else out = out.slice(0, at) + out.slice(at + 1);
  }
  return out;
}

/** Reads the shared conformance vectors of file name. */
export function readVectors<T>(name: string): T {
  return JSON.parse(readFileSync(join(conformanceDir, name), "utf8")) as T;
}
