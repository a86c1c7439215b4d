// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

/**
 * Decodes unpadded base64url strictly: only the URL-safe alphabet, and no
 * length that no byte string encodes to. Buffer's own decoder skips
 * characters it does not know; this one refuses them. Returns undefined for
 * anything else.
 * @internal
 */
export function decodeBase64url(s: string): Buffer | undefined {
  if (!isBase64url(s)) return undefined;
  return Buffer.from(s, "base64url");
}

/**
 * Reports whether decodeBase64url decodes s, without decoding it: for the
 * parts of a token that jose decodes again.
 * @internal
 */
export function isBase64url(s: string): boolean {
  return s.length % 4 !== 1 && /^[A-Za-z0-9_-]*$/.test(s);
}
