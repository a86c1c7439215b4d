// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The verifier's stamps of its two files: unchanged settled files are not
// read again, files changed less than two seconds ago are read on every
// call, and a key rotated in any of three ways is seen at the next call even
// when the old stamps were trusted, including when the stats run while jose
// checks the signature.

import assert from "node:assert/strict";
import fs, { renameSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { join } from "node:path";
import { test } from "node:test";
import { STAMP_SETTLE_MS, settled, stampOf, type FileStamp } from "../src/filestamp.js";
import {
  ISSUER_FILE_NAME,
  JWKS_FILE_NAME,
  JWKSVerifier,
  LEEWAY_SECONDS,
  TokenRefusedError,
} from "../src/index.js";
import { JOSE_DISPATCH_TURNS } from "../src/verifier.js";
import {
  jwksDir,
  newKey,
  publicJWK,
  publishKeys,
  signToken,
  tempDir,
  testInstance,
  testIssuer,
  testSubject,
} from "./helpers.js";

const linux = process.platform === "linux";
const noStamps = linux ? false : `no file stamps on ${process.platform}: read on every call`;

/** A clock for which every file looks older than the settle time. */
const settledClock = () => Date.now() + 60_000;

/** What the verifier last read, for the tests to see whether it read again. */
function lastRead(v: JWKSVerifier): { trusted: boolean } | undefined {
  return (v as unknown as { current?: { trusted: boolean } }).current;
}

/** Waits until a write gets a later change time than one just before it. */
const tickPast = () => new Promise((r) => setTimeout(r, 30));

test("settled files that did not change are not read again", { skip: noStamps }, async (t) => {
  const tmp = tempDir();
  t.after(tmp.cleanup);
  const key = newKey("ec-1", "ES256");
  await jwksDir(tmp.dir, testIssuer, [key]);
  const v = new JWKSVerifier(tmp.dir, testInstance, testSubject, { now: settledClock });
  const token = await signToken(key);
  await v.verify(token);
  const read = lastRead(v);
  assert.ok(read?.trusted, "the first read's stamps are not trusted");
  for (let i = 0; i < 3; i++) await v.verify(token);
  assert.equal(lastRead(v), read, "unchanged settled files were read again");
});

test(
  "files changed less than the settle time ago are read on every call",
  { skip: noStamps },
  async (t) => {
    const tmp = tempDir();
    t.after(tmp.cleanup);
    const key = newKey("ec-1", "ES256");
    await jwksDir(tmp.dir, testIssuer, [key]);
    // The real clock: the files were written just now.
    const v = new JWKSVerifier(tmp.dir, testInstance, testSubject);
    const token = await signToken(key);
    await v.verify(token);
    const first = lastRead(v);
    assert.equal(first?.trusted, false, "a fresh stamp was trusted");
    await v.verify(token);
    assert.notEqual(lastRead(v), first, "fresh files were not read again");
  },
);

test("trusted stamps still see a rotated key at the next call", { skip: noStamps }, async (t) => {
  const oldKey = newKey("rsa-a", "RS256");
  const rotated = newKey("rsa-a", "RS256");
  const oldJWKS = JSON.stringify({ keys: [await publicJWK(oldKey)] });
  const newJWKS = JSON.stringify({ keys: [await publicJWK(rotated)] });
  assert.equal(oldJWKS.length, newJWKS.length, "the same-size cases need key sets of one size");
  const oldToken = await signToken(oldKey);
  const newToken = await signToken(rotated);
  const plain = (dir: string) => {
    writeFileSync(join(dir, ISSUER_FILE_NAME), testIssuer);
    writeFileSync(join(dir, JWKS_FILE_NAME), oldJWKS);
  };
  const cases: Record<string, (dir: string) => Promise<() => Promise<void> | void>> = {
    // The kubelet's atomic writer: new files behind a swapped ..data link.
    "kubelet ..data link swap": async (dir) => {
      const d = await jwksDir(dir, testIssuer, [oldKey]);
      return () => publishKeys(d, testIssuer, [rotated]);
    },
    // A new file renamed over the old one: a new inode, the same size.
    "rename over": async (dir) => {
      plain(dir);
      return () => {
        writeFileSync(join(dir, "jwks.tmp"), newJWKS);
        renameSync(join(dir, "jwks.tmp"), join(dir, JWKS_FILE_NAME));
      };
    },
    // Rewritten in place with as many bytes, its modification time set
    // back: only the change time moves.
    "same size, same mtime, in place": async (dir) => {
      plain(dir);
      // Whole seconds, which utimes sets exactly.
      const path = join(dir, JWKS_FILE_NAME);
      utimesSync(path, 1_700_000_000, 1_700_000_000);
      return () => {
        const before = statSync(path, { bigint: true });
        writeFileSync(path, newJWKS);
        utimesSync(path, 1_700_000_000, 1_700_000_000);
        const after = statSync(path, { bigint: true });
        assert.equal(after.size, before.size);
        assert.equal(after.mtimeNs, before.mtimeNs);
        assert.notEqual(after.ctimeNs, before.ctimeNs);
      };
    },
  };
  for (const [name, setup] of Object.entries(cases)) {
    const tmp = tempDir();
    t.after(tmp.cleanup);
    const rotate = await setup(tmp.dir);
    const v = new JWKSVerifier(tmp.dir, testInstance, testSubject, { now: settledClock });
    await v.verify(oldToken);
    assert.ok(lastRead(v)?.trusted, `${name}: stamps not trusted, the stat path is not tested`);
    await tickPast();
    await rotate();
    await assert.rejects(v.verify(oldToken), /bad signature/, `${name}: retired key accepted`);
    await v.verify(newToken);
  }
});

test("a stamp stands for its file only once its last change is old enough", () => {
  const now = 1_800_000_000_000;
  const at = (ms: number) => BigInt(now + ms) * 1_000_000n;
  const stamp = (mtime: bigint, ctime: bigint): FileStamp => ({
    dev: 1n,
    ino: 2n,
    size: 3n,
    mtimeNs: mtime,
    ctimeNs: ctime,
  });
  const hour = 3_600_000;
  const cases: [string, FileStamp | undefined, boolean][] = [
    ["changed long ago", stamp(at(-hour), at(-hour)), true],
    [
      "changed exactly the settle time ago",
      stamp(at(-STAMP_SETTLE_MS), at(-STAMP_SETTLE_MS)),
      true,
    ],
    ["changed within the settle time", stamp(at(-hour), at(-STAMP_SETTLE_MS + 1)), false],
    ["modification time in the future", stamp(at(hour), at(-hour)), false],
    ["no stamp on this platform", undefined, false],
  ];
  for (const [name, s, want] of cases) assert.equal(settled(s, now), want, name);
  const st = statSync(".", { bigint: true });
  assert.equal(stampOf(st, "darwin"), undefined);
  assert.deepEqual(stampOf(st, "linux"), {
    dev: st.dev,
    ino: st.ino,
    size: st.size,
    mtimeNs: st.mtimeNs,
    ctimeNs: st.ctimeNs,
  });
});

test(
  "with trusted stamps, the stats run while WebCrypto checks the signature",
  { skip: noStamps },
  async (t) => {
    const tmp = tempDir();
    t.after(tmp.cleanup);
    const key = newKey("rsa-a", "RS256");
    await jwksDir(tmp.dir, testIssuer, [key]);
    const v = new JWKSVerifier(tmp.dir, testInstance, testSubject, { now: settledClock });
    const token = await signToken(key);
    await v.verify(token);
    const read = lastRead(v);
    assert.ok(read?.trusted, "the first read's stamps are not trusted");

    // Record, at each stat of a key file, whether jose had handed the
    // signature to WebCrypto yet. node:fs's named exports follow its
    // object's once syncBuiltinESMExports runs.
    const subtle = globalThis.crypto.subtle;
    const { statSync: realStat } = fs;
    let signing = 0;
    const seen: number[] = [];
    const verify = subtle.verify.bind(subtle);
    t.mock.method(subtle, "verify", (...args: Parameters<SubtleCrypto["verify"]>) => {
      signing++;
      return verify(...args);
    });
    const watched = new Set([join(tmp.dir, JWKS_FILE_NAME), join(tmp.dir, ISSUER_FILE_NAME)]);
    const stat = t.mock.method(fs, "statSync", ((
      path: fs.PathLike,
      options?: fs.StatSyncOptions,
    ) => {
      if (watched.has(String(path))) seen.push(signing);
      return realStat(path, options);
    }) as typeof fs.statSync);
    syncBuiltinESMExports();
    try {
      await v.verify(token);
    } finally {
      stat.mock.restore();
      syncBuiltinESMExports();
    }
    assert.equal(lastRead(v), read, "unchanged settled files were read again");
    assert.equal(signing, 1);
    assert.deepEqual(
      seen,
      [1, 1],
      `the stats ran before jose reached WebCrypto: JOSE_DISPATCH_TURNS (${JOSE_DISPATCH_TURNS}) no longer fits the pinned jose`,
    );
  },
);

test("a token parsed once is still checked in full on every call", async (t) => {
  const tmp = tempDir();
  t.after(tmp.cleanup);
  const key = newKey("rsa-a", "RS256");
  await jwksDir(tmp.dir, testIssuer, [key]);
  let now = Date.now();
  const v = new JWKSVerifier(tmp.dir, testInstance, testSubject, { now: () => now });
  const valid = await signToken(key, { expiresIn: 600 });
  const other = await signToken(key, { instance: "other" });
  const [h, body, sig] = valid.split(".") as [string, string, string];
  const claims = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as object;
  const unsigned = `${h}.${Buffer.from(JSON.stringify({ ...claims, aud: ["x"] })).toString("base64url")}.${sig}`;
  // Tokens in turn, each seen again after another: the cached parse of one
  // never stands for the next.
  for (let round = 0; round < 2; round++) {
    await v.verify(valid);
    await assert.rejects(v.verify(other), /invalid audience claim/);
    await assert.rejects(v.verify(unsigned), /bad signature/);
    await assert.rejects(v.verify(unsigned), /bad signature/);
    await v.verify(valid);
    await v.verify(valid);
  }
  // A token with the valid one's header is still checked part by part.
  const malformed = (e: unknown) => e instanceof TokenRefusedError && e.reason === "malformed";
  for (const bad of [`${h}.${body}*.${sig}`, `${h}.${body}.${sig}=`, `${h}.${body}`]) {
    await assert.rejects(v.verify(bad), malformed, bad.slice(-8));
    await v.verify(valid);
  }
  // The same token's times are checked against the clock at each call.
  now += (600 + LEEWAY_SECONDS + 1) * 1000;
  await assert.rejects(v.verify(valid), /token is expired/);
  now -= (600 + LEEWAY_SECONDS + 1) * 1000;
  await v.verify(valid);
});
