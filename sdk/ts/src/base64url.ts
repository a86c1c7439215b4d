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
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) return undefined;
  return Buffer.from(s, "base64url");
}
