// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The cost of the SDK's token check beside bare jose on the same token and
// key (npm run bench, hack/test/bench.sh sdk-ts; figures in
// docs/performance.md). Each iteration calls the SDK's JWKSVerifier, jose's
// jwtVerify with the public key and jwtVerify with a local key set, in an
// order that rotates from one iteration to the next, so load from elsewhere
// on the machine falls on all three alike. Each run prints one line in Go's
// benchmark format, for benchstat: the mean time of each path and the median
// of the per-iteration ratios, which a burst of load moves less than either
// time. BenchmarkVerify/ALG verifies one token at every call, as a plugin
// does between the core's renewals of its token; BenchmarkVerify/ALG/new-token
// alternates two tokens, so that the SDK parses each call's token anew.
//
//   node build/bench/verifier.js [--count N] [--benchtime SECONDS] [--run RS256|ES256|new-token]

import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { STAMP_SETTLE_MS } from "../src/filestamp.js";
import { verifyPaths, type Check } from "./paths.js";

const { values } = parseArgs({
  options: {
    count: { type: "string", default: "6" },
    benchtime: { type: "string", default: "2" },
    run: { type: "string", default: "" },
  },
});
const count = Number(values.count);
const benchtime = Number(values.benchtime);
if (!(Number.isInteger(count) && count > 0) || !(benchtime > 0)) {
  throw new Error("--count is a whole number above 0 and --benchtime a number of seconds above 0");
}

/** The median of xs, which it sorts. */
function median(xs: number[]): number {
  xs.sort((a, b) => a - b);
  const mid = xs.length >> 1;
  return xs.length % 2 === 1
    ? (xs[mid] as number)
    : ((xs[mid - 1] as number) + (xs[mid] as number)) / 2;
}

/** The duration in nanoseconds of one awaited check. */
async function timed(check: Check, token: string): Promise<number> {
  const start = process.hrtime.bigint();
  await check(token);
  return Number(process.hrtime.bigint() - start);
}

console.log(`pkg: @openfief/sdk`);
console.log(`node: ${process.version}`);
console.log(`cpu: ${cpus()[0]?.model.trim() ?? "unknown"}`);

const cases = [
  { alg: "RS256", newToken: false },
  { alg: "ES256", newToken: false },
  { alg: "RS256", newToken: true },
  { alg: "ES256", newToken: true },
] as const;

for (const { alg, newToken } of cases) {
  const name = `BenchmarkVerify/${alg}${newToken ? "/new-token" : ""}`;
  if (values.run !== "" && !name.includes(values.run)) continue;
  const p = await verifyPaths(alg);
  try {
    // The steady state: key files whose last change is old enough for
    // their stamps to stand for them, as a mount's are between rotations.
    await new Promise((r) => setTimeout(r, STAMP_SETTLE_MS + 100));
    const paths: Check[] = [p.sdk, p.jose, p.joseJWKS];
    const tokens = newToken ? [p.token, p.otherToken] : [p.token];
    // Warm up: the JIT, jose's cache of imported keys, the SDK's key set.
    for (let i = 0; i < 200; i++) {
      for (const check of paths) await check(tokens[i % tokens.length] as string);
    }
    for (let run = 0; run < count; run++) {
      const total = [0, 0, 0];
      const ratios: number[] = [];
      const ratiosJWKS: number[] = [];
      const deadline = process.hrtime.bigint() + BigInt(Math.round(benchtime * 1e9));
      let n = 0;
      while (process.hrtime.bigint() < deadline) {
        const token = tokens[n % tokens.length] as string;
        const t = [0, 0, 0];
        for (let j = 0; j < 3; j++) {
          const which = (n + j) % 3;
          t[which] = await timed(paths[which] as Check, token);
        }
        for (let j = 0; j < 3; j++) total[j] = (total[j] as number) + (t[j] as number);
        const [sdk, jose, joseJWKS] = t as [number, number, number];
        ratios.push(sdk / jose);
        ratiosJWKS.push(sdk / joseJWKS);
        n++;
      }
      const [sdk, jose, joseJWKS] = total as [number, number, number];
      console.log(
        [
          name,
          String(n),
          `${((sdk + jose + joseJWKS) / n).toFixed(0)} ns/op`,
          `${(sdk / n / 1e3).toFixed(2)} sdk-µs/op`,
          `${(jose / n / 1e3).toFixed(2)} jose-µs/op`,
          `${(joseJWKS / n / 1e3).toFixed(2)} jose-jwks-µs/op`,
          `${median(ratios).toFixed(3)} sdk/jose`,
          `${median(ratiosJWKS).toFixed(3)} sdk/jose-jwks`,
        ].join("\t"),
      );
    }
  } finally {
    p.cleanup();
  }
}
