// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import type { BigIntStats } from "node:fs";
import { join } from "node:path";
import { compactVerify } from "jose";
import { decodeBase64url, isBase64url } from "./base64url.js";
import { DEFAULT_SA_JWKS_DIR, Env, type Environment } from "./env.js";
import { describe, readInDirStamped } from "./files.js";
import { settled, stampOf, unchanged, type FileStamp } from "./filestamp.js";
import { objectsWithDuplicateMembers } from "./jsondup.js";
import {
  ALLOWED_ALGORITHMS,
  parseSigningKeys,
  type SigningAlgorithm,
  type VerifyKey,
} from "./keys.js";

/** The file of the openfief-sa-jwks ConfigMap holding the cluster's public keys. */
export const JWKS_FILE_NAME = "jwks.json";

/** The file of the openfief-sa-jwks ConfigMap holding the token issuer. */
export const ISSUER_FILE_NAME = "issuer";

/**
 * The clock skew, in seconds, allowed when checking a token's expiry,
 * not-before and issued-at times.
 */
export const LEEWAY_SECONDS = 60;

/** Bounds the bearer tokens verify parses; a Kubernetes token is a few kilobytes. */
const MAX_TOKEN_LENGTH = 16 << 10;

/** Bound the two files the verifier reads. */
const MAX_JWKS_BYTES = 1 << 20;
const MAX_ISSUER_BYTES = 4 << 10;

/**
 * NumericDates at or beyond 2^62 seconds either way are refused, as the Go
 * SDK refuses them.
 */
const MAX_NUMERIC_DATE = 2 ** 62;

/**
 * Why a token was refused, the same for both SDKs (the shared conformance
 * vectors check it):
 *
 * - malformed: no token, too long, not a compact JWS with an allowed algorithm;
 * - key_id: no key ID, or one the mounted key set does not hold;
 * - key_alg: the token's algorithm is not the one its key verifies;
 * - signature: the signature does not verify, or the claims are not readable;
 * - expiry: no expiry, or expired;
 * - not_yet_valid, issued_in_future: a not-before or issued-at time ahead of now;
 * - issuer, subject, audience: a claim that is not the expected one;
 * - keys: the mounted key set or issuer cannot be read or holds no usable key.
 */
export type RefusalReason =
  | "malformed"
  | "key_id"
  | "key_alg"
  | "signature"
  | "expiry"
  | "not_yet_valid"
  | "issued_in_future"
  | "issuer"
  | "subject"
  | "audience"
  | "keys";

/**
 * TokenRefusedError is every reason a verifier refuses a token. Its message
 * never contains the token.
 */
export class TokenRefusedError extends Error {
  override name = "TokenRefusedError";
  constructor(
    /** Why, as a fixed word. */
    readonly reason: RefusalReason,
    detail: string,
  ) {
    super(`token refused: ${detail}`);
  }
}

/**
 * CoreVerifier decides whether a bearer token proves that the core is calling
 * this plugin instance. The server consults it before any handler runs.
 */
export interface CoreVerifier {
  /**
   * Resolves only for a token the core holds for this instance; otherwise
   * rejects, with an error that never contains the token.
   */
  verify(token: string): Promise<void>;
}

/**
 * The audience of the tokens the core sends to the plugin instance name:
 * "openfief-plugin:<name>".
 */
export function instanceAudience(name: string): string {
  return "openfief-plugin:" + name;
}

/** Options of a {@link JWKSVerifier}. */
export interface JWKSVerifierOptions {
  /**
   * The clock, in milliseconds since the Unix epoch, for the token's times
   * and for how old a file's last change is; Date.now by default.
   */
  now?: () => number;
}

/** One parse of the two files, kept with the bytes it came from. */
interface KeySet {
  rawJWKS: Buffer;
  rawIssuer: Buffer;
  issuer: string;
  keys?: Map<string, VerifyKey>;
  err?: string;
}

/**
 * A key set with the stamps of the two files, taken on the open files it
 * was read from. trusted is false when either stamp may be shared with a
 * later write (or there is none, outside Linux): the files are then read on
 * every call until a read finds them settled.
 */
interface StampedKeySet {
  ks: KeySet;
  jwks: FileStamp | undefined;
  issuer: FileStamp | undefined;
  trusted: boolean;
}

/**
 * The parse of one token: its parts, its protected header and, once parsed,
 * its claims, which count only in a call whose signature check passed. All
 * depend on the token's text alone.
 */
interface ParsedToken {
  token: string;
  /** The token's first two parts as it encodes them. */
  headerPart: string;
  payloadPart: string;
  header: Header;
  claims?: Claims;
}

/** A token whose signature verified: its payload, and the issuer of the key set that verified it. */
interface Signed {
  issuer: string;
  payload: Uint8Array;
}

/**
 * How many turns of the microtask queue jose 6 takes, from compactVerify's
 * call, to hand the signature to crypto.subtle.verify (its key preparation
 * awaits two settled promises). The verifier lets as many pass before it
 * stats its files, so that the stats run while the thread pool computes the
 * signature. A jose that took more turns would only make the stats run
 * before the signature starts, as they used to: slower, never wrong (a test
 * checks the count against the pinned jose).
 * @internal
 */
export const JOSE_DISPATCH_TURNS = 2;

/**
 * JWKSVerifier is the SDK's CoreVerifier: it checks a core token's signature
 * with jose against the cluster's public keys in jwks.json, and its claims
 * against the issuer in issuer, the core's ServiceAccount as subject, this
 * instance's audience and an expiry, with one minute of leeway. Every call
 * looks at both files: it stats them, and reads them again (through the
 * checks of their directory) when their stamp (device, inode, size,
 * modification and change time) differs from the one they were read with,
 * or when that read came less than two seconds after their last change; the
 * bytes are parsed again only when they differ. A key the operator rotates
 * or retires therefore counts from the first call after the kubelet updates
 * the mount, with no delay added by the cache. When the stamps it holds are
 * trusted, the stats run while WebCrypto checks the signature, and a changed
 * stamp drops that check's result. The header and claims of the last token
 * are parsed once, not at each call with the same token; its signature and
 * claims are checked at every call.
 */
export class JWKSVerifier implements CoreVerifier {
  private readonly audience: string;
  private readonly now: () => number;
  /** The two files' paths, stat'ed on every call. */
  private readonly jwksPath: string;
  private readonly issuerPath: string;
  /** The last parse of the files' bytes. */
  private cached: KeySet | undefined;
  /**
   * The key set with the stamps of the files it was last read from; a call
   * whose stat finds the same stamps uses it unread.
   */
  private current: StampedKeySet | undefined;
  /**
   * The parse of the last token seen. The core sends one instance the same
   * token until it renews it, so each call compares the text with this one
   * and parses only a different token; the signature and the claims' times
   * are still checked on every call.
   */
  private parsed: ParsedToken | undefined;

  /**
   * Returns a verifier of core tokens for the plugin instance named
   * instance, sent by the ServiceAccount username subject, with the
   * openfief-sa-jwks files in dir. The files need not exist yet: every
   * verify reads them.
   */
  constructor(
    private readonly dir: string,
    instance: string,
    private readonly subject: string,
    options: JWKSVerifierOptions = {},
  ) {
    if (dir === "") throw new Error("jwks verifier: no key directory");
    if (instance === "") throw new Error(`jwks verifier: no instance name (${Env.Instance})`);
    if (subject === "") throw new Error(`jwks verifier: no core subject (${Env.CoreSubject})`);
    this.audience = instanceAudience(instance);
    this.jwksPath = join(dir, JWKS_FILE_NAME);
    this.issuerPath = join(dir, ISSUER_FILE_NAME);
    this.now = options.now ?? Date.now;
  }

  /**
   * Resolves when token is a JWT signed with RS256, ES256, ES384 or ES512 by
   * the mounted key its key ID names, issued by the mounted issuer to the
   * core's subject for this instance's audience, and not expired. Every
   * refusal is a {@link TokenRefusedError}; none contains the token.
   */
  async verify(token: string): Promise<void> {
    let parsed = this.parsed;
    if (parsed?.token !== token) {
      parsed = parseCompact(token, parsed);
      this.parsed = parsed;
    }
    const header = parsed.header;
    if (header.kid === "") throw new TokenRefusedError("key_id", "no key ID");
    const signed =
      (await this.verifyWithTrusted(parsed)) ?? (await this.verifyWithRead(token, header));
    const claims = (parsed.claims ??= parseClaims(signed.payload));
    if (claims === undefined) throw new TokenRefusedError("signature", "bad signature");
    checkClaims(claims, {
      issuer: signed.issuer,
      subject: this.subject,
      audience: this.audience,
      nowMs: this.now(),
    });
  }

  /**
   * Checks token's signature with the key set of the last read, when that
   * read was trusted and holds the token's key, while the two files are
   * stat'ed: jose hands the signature to WebCrypto, which computes it on
   * libuv's thread pool, and the stats run in the meantime. When either file
   * changed, the result is dropped and undefined returned, and the call goes
   * on as if there had been no trusted read, so a rotated key still counts
   * from this call. The claims of a token not seen before are parsed in the
   * same wait; they count only once the signature verified. Also undefined
   * when there is no such read or key.
   */
  private async verifyWithTrusted(parsed: ParsedToken): Promise<Signed | undefined> {
    const { token, header } = parsed;
    const cur = this.current;
    const key = cur?.trusted ? cur.ks.keys?.get(header.kid) : undefined;
    if (cur === undefined || key === undefined || key.alg !== header.alg) return undefined;
    const pending = compactVerify(token, key.key, verifyOptions[key.alg]).then(
      (r) => r.payload,
      () => undefined,
    );
    for (let i = 0; i < JOSE_DISPATCH_TURNS; i++) await Promise.resolve();
    if (
      !unchanged(this.jwksPath, cur.jwks as FileStamp) ||
      !unchanged(this.issuerPath, cur.issuer as FileStamp)
    ) {
      return undefined;
    }
    // The payload as the token encodes it: parseCompact found it strict
    // base64url, and jose decodes the same text to the bytes it verifies.
    parsed.claims ??= parseClaims(Buffer.from(parsed.payloadPart, "base64url"));
    const payload = await pending;
    if (payload === undefined) throw new TokenRefusedError("signature", "bad signature");
    return { issuer: cur.ks.issuer, payload };
  }

  /**
   * Checks token's signature with the key set the files hold now: the last
   * one when its read was trusted and both files still have its stamps,
   * otherwise one read from them again. The refusals come in the Go SDK's
   * order: the key set, the key ID, the algorithm, the signature.
   */
  private async verifyWithRead(token: string, header: Header): Promise<Signed> {
    const ks = this.keysUnread() ?? (await this.keys());
    if (ks.err !== undefined || ks.keys === undefined) {
      throw new TokenRefusedError("keys", ks.err ?? "no keys");
    }
    const key = ks.keys.get(header.kid);
    if (key === undefined) throw new TokenRefusedError("key_id", "unknown key ID");
    if (key.alg !== header.alg) {
      throw new TokenRefusedError("key_alg", "algorithm does not fit the key");
    }
    try {
      const { payload } = await compactVerify(token, key.key, verifyOptions[key.alg]);
      return { issuer: ks.issuer, payload };
    } catch {
      throw new TokenRefusedError("signature", "bad signature");
    }
  }

  /**
   * Returns the key set of the last read when that read was trusted and both
   * files' stamps are still those it took, without reading them; otherwise
   * undefined, and keys must read them.
   */
  private keysUnread(): KeySet | undefined {
    const cur = this.current;
    if (
      cur?.trusted &&
      unchanged(this.jwksPath, cur.jwks as FileStamp) &&
      unchanged(this.issuerPath, cur.issuer as FileStamp)
    ) {
      return cur.ks;
    }
    return undefined;
  }

  /**
   * Reads both files and returns their key set, parsed again only when their
   * bytes differ from the last parse.
   */
  private async keys(): Promise<KeySet> {
    // Taken before the files are opened: a change after it leaves a change
    // time no earlier than it, less the file system's granularity.
    const readAt = this.now();
    let issuer: { data: Buffer; stats: BigIntStats };
    let jwks: { data: Buffer; stats: BigIntStats };
    try {
      issuer = await readInDirStamped(this.dir, ISSUER_FILE_NAME, MAX_ISSUER_BYTES);
    } catch (e) {
      throw new TokenRefusedError("keys", `read ${ISSUER_FILE_NAME}: ${describe(e)}`);
    }
    try {
      jwks = await readInDirStamped(this.dir, JWKS_FILE_NAME, MAX_JWKS_BYTES);
    } catch (e) {
      throw new TokenRefusedError("keys", `read ${JWKS_FILE_NAME}: ${describe(e)}`);
    }
    let ks = this.cached;
    if (ks === undefined || !ks.rawJWKS.equals(jwks.data) || !ks.rawIssuer.equals(issuer.data)) {
      ks = parseKeySet(jwks.data, issuer.data);
      this.cached = ks;
    }
    const jwksStamp = stampOf(jwks.stats);
    const issuerStamp = stampOf(issuer.stats);
    this.current = {
      ks,
      jwks: jwksStamp,
      issuer: issuerStamp,
      trusted: settled(jwksStamp, readAt) && settled(issuerStamp, readAt),
    };
    return ks;
  }
}

function parseKeySet(rawJWKS: Buffer, rawIssuer: Buffer): KeySet {
  const issuer = rawIssuer.toString("utf8").replace(/^[\t\n\v\f\r ]+|[\t\n\v\f\r ]+$/g, "");
  const ks: KeySet = { rawJWKS, rawIssuer, issuer };
  if (issuer === "") {
    ks.err = `${ISSUER_FILE_NAME} is empty`;
    return ks;
  }
  try {
    ks.keys = parseSigningKeys(rawJWKS, JWKS_FILE_NAME);
  } catch (e) {
    ks.err = (e as Error).message;
  }
  return ks;
}

/**
 * Builds the JWKSVerifier the operator configured: instance from
 * OPENFIEF_INSTANCE, subject from OPENFIEF_CORE_SUBJECT and the key directory
 * from OPENFIEF_SA_JWKS_DIR, or the default directory when unset.
 */
export function newCoreVerifier(env: Environment = process.env): JWKSVerifier {
  return new JWKSVerifier(
    env[Env.SAJWKSDir] || DEFAULT_SA_JWKS_DIR,
    env[Env.Instance] ?? "",
    env[Env.CoreSubject] ?? "",
  );
}

/** jose's options for each algorithm: that algorithm alone. */
const verifyOptions: Record<SigningAlgorithm, { algorithms: SigningAlgorithm[] }> = {
  RS256: { algorithms: ["RS256"] },
  ES256: { algorithms: ["ES256"] },
  ES384: { algorithms: ["ES384"] },
  ES512: { algorithms: ["ES512"] },
};

/** The protected header fields the verifier reads. */
interface Header {
  alg: SigningAlgorithm;
  kid: string;
}

function malformed(detail: string): TokenRefusedError {
  return new TokenRefusedError("malformed", detail);
}

/**
 * Checks that token is a compact JWS, three strict base64url parts, whose
 * protected header is a JSON object naming an allowed algorithm; returns its
 * parts and that header. The header of prev, the last token parsed, is taken
 * as it stands when this token's is the same text: the tokens a key signs
 * share one.
 */
function parseCompact(token: string, prev: ParsedToken | undefined): ParsedToken {
  if (token === "") throw malformed("no token");
  if (token.length > MAX_TOKEN_LENGTH) throw malformed("token too long");
  const parts = token.split(".");
  if (parts.length !== 3) throw notJWS();
  const [h, p, s] = parts as [string, string, string];
  // Only the header is decoded here; jose decodes the payload and the
  // signature, which must be as strict.
  if (!isBase64url(p) || !isBase64url(s)) throw notJWS();
  const header = prev?.headerPart === h ? prev.header : parseHeader(h);
  return { token, headerPart: h, payloadPart: p, header };
}

function notJWS(): TokenRefusedError {
  return malformed("not a JWS with an allowed algorithm");
}

/** Reads a token's protected header from its base64url text. */
function parseHeader(h: string): Header {
  const decoded = decodeBase64url(h);
  if (decoded === undefined) throw notJWS();
  let header: unknown;
  try {
    const text = decoded.toString("utf8");
    header = JSON.parse(text);
    if (objectsWithDuplicateMembers(text).has("")) throw notJWS();
  } catch {
    throw notJWS();
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) throw notJWS();
  const fields = header as Record<string, unknown>;
  const alg = fields["alg"];
  if (typeof alg !== "string" || !(ALLOWED_ALGORITHMS as readonly string[]).includes(alg)) {
    throw notJWS();
  }
  const kid = fields["kid"];
  if (kid !== undefined && kid !== null && typeof kid !== "string") throw notJWS();
  return { alg: alg as SigningAlgorithm, kid: typeof kid === "string" ? kid : "" };
}

/** The registered claims, read as the Go SDK reads them. */
interface Claims {
  iss: string;
  sub: string;
  aud: string[];
  exp?: number;
  nbf?: number;
  iat?: number;
}

/**
 * Reads the registered claims of a payload, or returns undefined when one of
 * them has the wrong type: strings for iss, sub and jti, a string or a list
 * of strings for aud, numbers for exp, nbf and iat (whole seconds, the
 * fraction dropped), and no member named twice. A null payload has no
 * claims.
 */
function parseClaims(payload: Uint8Array): Claims | undefined {
  let v: unknown;
  try {
    const text = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString(
      "utf8",
    );
    v = JSON.parse(text);
    if (objectsWithDuplicateMembers(text).has("")) return undefined;
  } catch {
    return undefined;
  }
  if (v === null) v = {};
  if (typeof v !== "object" || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const s = (name: string): string | undefined => {
    const x = o[name];
    if (x === undefined || x === null) return "";
    return typeof x === "string" ? x : undefined;
  };
  const iss = s("iss");
  const sub = s("sub");
  const jti = s("jti");
  if (iss === undefined || sub === undefined || jti === undefined) return undefined;
  let aud: string[];
  const a = o["aud"];
  if (a === undefined) aud = [];
  else if (typeof a === "string") aud = [a];
  else if (Array.isArray(a) && a.every((x): x is string => typeof x === "string")) aud = a;
  else return undefined;
  const claims: Claims = { iss, sub, aud };
  for (const name of ["exp", "nbf", "iat"] as const) {
    const x = o[name];
    if (x === undefined || x === null) continue;
    if (typeof x !== "number" || !(Math.abs(x) < MAX_NUMERIC_DATE)) return undefined;
    claims[name] = Math.trunc(x);
  }
  return claims;
}

/** Checks the claims in the Go SDK's order, with the leeway. */
function checkClaims(
  c: Claims,
  want: { issuer: string; subject: string; audience: string; nowMs: number },
): void {
  if (c.exp === undefined) throw new TokenRefusedError("expiry", "no expiry");
  if (c.iss !== want.issuer) throw new TokenRefusedError("issuer", "invalid issuer claim (iss)");
  if (c.sub !== want.subject) throw new TokenRefusedError("subject", "invalid subject claim (sub)");
  if (!c.aud.includes(want.audience)) {
    throw new TokenRefusedError("audience", "invalid audience claim (aud)");
  }
  const leeway = LEEWAY_SECONDS * 1000;
  if (c.nbf !== undefined && want.nowMs + leeway < c.nbf * 1000) {
    throw new TokenRefusedError("not_yet_valid", "token not valid yet (nbf)");
  }
  if (want.nowMs - leeway > c.exp * 1000) {
    throw new TokenRefusedError("expiry", "token is expired (exp)");
  }
  if (c.iat !== undefined && want.nowMs + leeway < c.iat * 1000) {
    throw new TokenRefusedError("issued_in_future", "token issued in the future (iat)");
  }
}
