// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The two ways the verifier benchmark checks one core token: the SDK's
// JWKSVerifier, reading its key directory as a plugin does, and bare jose's
// jwtVerify with the same public key and the same claim checks. The
// benchmark times them side by side; test/verifier.test.ts checks that they
// accept and refuse the same tokens, so the comparison is of equal work.

import { createLocalJWKSet, jwtVerify } from "jose";
import { JWKSVerifier, LEEWAY_SECONDS, instanceAudience } from "../src/index.js";
import {
  jwksDir,
  newKey,
  publicJWK,
  signToken,
  tempDir,
  testInstance,
  testIssuer,
  testSubject,
  type TestKey,
} from "../test/helpers.js";

/** A check of one token: resolves when it is accepted, rejects otherwise. */
export type Check = (token: string) => Promise<unknown>;

/** The paths for one algorithm, the key that signs for them, and a valid token. */
export interface VerifyPaths {
  alg: "RS256" | "ES256";
  key: TestKey;
  /** A core token for the test instance, valid for an hour. */
  token: string;
  /** Another such token, one second longer: the SDK parses it anew after token. */
  otherToken: string;
  /** The SDK: JWKSVerifier over a kubelet-style key directory. */
  sdk: Check;
  /** Bare jose: jwtVerify with the public key itself. */
  jose: Check;
  /** Bare jose: jwtVerify with a local key set holding the same JWKS. */
  joseJWKS: Check;
  cleanup: () => void;
}

/**
 * Builds both paths for alg. The key directory holds the RSA key and the
 * EC key, as a cluster's may during a rotation, each with its own key ID;
 * jose's options are the SDK's rules that jose can express: the one
 * algorithm of the key, the issuer, subject and audience, an expiry
 * required, and the same leeway.
 */
export async function verifyPaths(alg: "RS256" | "ES256"): Promise<VerifyPaths> {
  const keys = [newKey("bench-rsa", "RS256"), newKey("bench-ec", "ES256")];
  const key = keys.find((k) => k.alg === alg) as TestKey;
  const tmp = tempDir();
  await jwksDir(tmp.dir, testIssuer, keys);
  const sdk = new JWKSVerifier(tmp.dir, testInstance, testSubject);
  const options = {
    algorithms: [alg],
    issuer: testIssuer,
    subject: testSubject,
    audience: instanceAudience(testInstance),
    clockTolerance: LEEWAY_SECONDS,
    requiredClaims: ["exp"],
  };
  const jwks = createLocalJWKSet({ keys: await Promise.all(keys.map(publicJWK)) });
  return {
    alg,
    key,
    token: await signToken(key, { expiresIn: 3600 }),
    otherToken: await signToken(key, { expiresIn: 3601 }),
    sdk: (token) => sdk.verify(token),
    jose: (token) => jwtVerify(token, key.publicKey, options),
    joseJWKS: (token) => jwtVerify(token, jwks, options),
    cleanup: tmp.cleanup,
  };
}
