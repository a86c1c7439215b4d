// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { createPublicKey, type KeyObject } from "node:crypto";
import { decodeBase64url } from "./base64url.js";
import { objectsWithDuplicateMembers } from "./jsondup.js";

/** The smallest RSA modulus a kept key may have. */
const MIN_RSA_BITS = 2048;

/** The signature algorithms a core token may use. */
export type SigningAlgorithm = "RS256" | "ES256" | "ES384" | "ES512";

/**
 * The only signature algorithms a core token may use: those Kubernetes signs
 * ServiceAccount tokens with. "none" and every HMAC algorithm are refused
 * before any key is tried.
 */
export const ALLOWED_ALGORITHMS: readonly SigningAlgorithm[] = ["RS256", "ES256", "ES384", "ES512"];

/** One kept public key and the only algorithm it verifies. */
export interface VerifyKey {
  readonly key: KeyObject;
  readonly alg: SigningAlgorithm;
}

const curves: Record<string, { alg: SigningAlgorithm; size: number }> = {
  "P-256": { alg: "ES256", size: 32 },
  "P-384": { alg: "ES384", size: 48 },
  "P-521": { alg: "ES512", size: 66 },
};

/**
 * Reads a JSON Web Key Set and keeps, by key ID, only the keys a core token
 * may be checked with: public RSA keys of at least 2048 bits (RS256) and
 * public EC keys on P-256, P-384 or P-521 (ES256, ES384, ES512), with a key
 * ID, for signing ("use" empty or "sig") and, when "alg" is given, naming the
 * algorithm that fits the key. Other keys, and every key whose ID appears
 * twice, or that names one of its members twice, are dropped; a set that
 * keeps no key is an error.
 * @internal
 */
export function parseSigningKeys(data: Buffer, fileName: string): Map<string, VerifyKey> {
  let set: unknown;
  let repeated: Set<string>;
  try {
    const text = data.toString("utf8");
    set = JSON.parse(text);
    repeated = objectsWithDuplicateMembers(text);
  } catch (e) {
    throw new Error(`${fileName} is not a JSON Web Key Set: ${(e as Error).message}`);
  }
  if (
    !isObject(set) ||
    (set["keys"] !== undefined && set["keys"] !== null && !Array.isArray(set["keys"]))
  ) {
    throw new Error(`${fileName} is not a JSON Web Key Set: "keys" is not a list`);
  }
  const list: unknown[] = Array.isArray(set["keys"]) ? set["keys"] : [];
  const keys = new Map<string, VerifyKey>();
  const dup = new Set<string>();
  for (const [i, raw] of list.entries()) {
    // A key that names a member twice is not read, as in the Go SDK.
    if (repeated.has(`/keys/${i}`)) continue;
    const k = signingKey(raw);
    if (k === undefined) continue;
    const [kid, key] = k;
    if (keys.has(kid) || dup.has(kid)) {
      // Two keys under one ID are ambiguous: use neither.
      keys.delete(kid);
      dup.add(kid);
      continue;
    }
    keys.set(kid, key);
  }
  if (keys.size === 0) throw new Error(`${fileName} holds no usable public signing key`);
  return keys;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A string member, "" when absent or null; undefined when of another type. */
function str(o: Record<string, unknown>, name: string): string | undefined {
  const v = o[name];
  if (v === undefined || v === null) return "";
  return typeof v === "string" ? v : undefined;
}

/** Returns the key ID and key of raw when it may verify core tokens. */
function signingKey(raw: unknown): [string, VerifyKey] | undefined {
  if (!isObject(raw)) return undefined;
  const kid = str(raw, "kid");
  const use = str(raw, "use");
  const alg = str(raw, "alg");
  const kty = str(raw, "kty");
  if (!kid || use === undefined || alg === undefined || kty === undefined) return undefined;
  if (use !== "" && use !== "sig") return undefined;
  // Private keys (a "d" member), symmetric keys and other key types never
  // verify a core token.
  if (raw["d"] !== undefined && raw["d"] !== null) return undefined;
  let key: VerifyKey | undefined;
  if (kty === "RSA") key = rsaKey(raw);
  else if (kty === "EC") key = ecKey(raw);
  if (key === undefined) return undefined;
  if (alg !== "" && alg !== key.alg) return undefined;
  return [kid, key];
}

function rsaKey(raw: Record<string, unknown>): VerifyKey | undefined {
  const n = typeof raw["n"] === "string" ? decodeBase64url(raw["n"]) : undefined;
  const e = typeof raw["e"] === "string" ? decodeBase64url(raw["e"]) : undefined;
  if (!n || !e || n.length === 0 || e.length === 0) return undefined;
  let key: KeyObject;
  try {
    key = createPublicKey({
      key: { kty: "RSA", n: n.toString("base64url"), e: e.toString("base64url") },
      format: "jwk",
    });
  } catch {
    return undefined;
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < MIN_RSA_BITS) return undefined;
  return { key, alg: "RS256" };
}

function ecKey(raw: Record<string, unknown>): VerifyKey | undefined {
  const crv = typeof raw["crv"] === "string" ? curves[raw["crv"]] : undefined;
  if (crv === undefined) return undefined;
  const x = typeof raw["x"] === "string" ? decodeBase64url(raw["x"]) : undefined;
  const y = typeof raw["y"] === "string" ? decodeBase64url(raw["y"]) : undefined;
  // Each coordinate is the full size of one for the curve.
  if (!x || !y || x.length !== crv.size || y.length !== crv.size) return undefined;
  try {
    // Node refuses a point that is not on the curve.
    const key = createPublicKey({
      key: {
        kty: "EC",
        crv: raw["crv"] as string,
        x: x.toString("base64url"),
        y: y.toString("base64url"),
      },
      format: "jwk",
    });
    return { key, alg: crv.alg };
  } catch {
    return undefined;
  }
}
