// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The finder of repeated JSON members on random JSON from a fixed seed, so a
// failure replays.

import assert from "node:assert/strict";
import { test } from "node:test";
import { objectsWithDuplicateMembers } from "../src/jsondup.js";
import { rng } from "./helpers.js";

/** Random JSON text with objects that sometimes repeat a member, and where. */
function randomJSON(next: () => number, depth: number, path: string, dups: Set<string>): string {
  const r = next();
  if (depth > 3 || r < 0.3) {
    return (
      ["1", "-2.5e3", "true", "null", '"s"', '"a\\"b"', '"\\u00e9"'][Math.floor(next() * 7)] ?? "0"
    );
  }
  if (r < 0.6) {
    const n = Math.floor(next() * 4);
    const items = Array.from({ length: n }, (_, i) =>
      randomJSON(next, depth + 1, `${path}/${i}`, dups),
    );
    return ` [ ${items.join(" ,\n")} ] `;
  }
  const names = ["a", "b", "a/b", "~", "\\u0061"];
  const n = Math.floor(next() * 4);
  const seen = new Set<string>();
  const members: string[] = [];
  for (let i = 0; i < n; i++) {
    const raw = names[Math.floor(next() * names.length)] ?? "a";
    const name = JSON.parse(`"${raw}"`) as string;
    if (seen.has(name)) dups.add(path);
    seen.add(name);
    const child = `${path}/${name.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    members.push(`"${raw}" :${randomJSON(next, depth + 1, child, dups)}`);
  }
  return `{${members.join(",")}}`;
}

test("repeated members are found where they are, in any JSON", () => {
  const next = rng(11);
  for (let i = 0; i < 5000; i++) {
    const dups = new Set<string>();
    const text = randomJSON(next, 0, "", dups);
    JSON.parse(text);
    const found = objectsWithDuplicateMembers(text);
    // A path can be reached twice when a repeated member holds an object:
    // every real repetition is found, and nothing is found that is not one
    // or does not sit under one.
    for (const d of dups) assert.ok(found.has(d), `${text}: ${d} not found`);
    for (const f of found) {
      assert.ok(dups.has(f) || [...dups].some((d) => f.startsWith(d + "/")), `${text}: ${f}`);
    }
  }
});
