// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { constants, type BigIntStats } from "node:fs";
import { open, readlink, realpath, stat } from "node:fs/promises";
import { join, sep } from "node:path";

/**
 * Reads the file name in dir, refusing one larger than limit bytes, one that
 * is not a regular file, and one that lies outside dir once symbolic links
 * are followed. The kubelet updates mounted Secrets and ConfigMaps by swapping
 * links inside the directory, so a link may move within dir but never lead
 * out of it. The check is made on the file actually opened: on Linux through
 * /proc/self/fd, elsewhere by comparing device and inode with the resolved
 * path's.
 * @internal
 */
export async function readInDir(dir: string, name: string, limit: number): Promise<Buffer> {
  return (await readInDirStamped(dir, name, limit)).data;
}

/**
 * Reads the file as readInDir does, and returns with its bytes what fstat
 * reported on the open file before it was read, in nanoseconds: the stamp
 * the verifier keeps to know the file unchanged (filestamp.ts).
 * @internal
 */
export async function readInDirStamped(
  dir: string,
  name: string,
  limit: number,
): Promise<{ data: Buffer; stats: BigIntStats }> {
  const path = join(dir, name);
  const fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = await fh.stat({ bigint: true });
    if (!st.isFile()) throw new Error("not a regular file");
    const realDir = await realpath(dir);
    let opened: string | undefined;
    try {
      opened = await readlink(`/proc/self/fd/${fh.fd}`);
    } catch {
      opened = undefined;
    }
    if (opened === undefined || !opened.startsWith("/")) {
      opened = await realpath(path);
      const again = await stat(opened, { bigint: true });
      if (again.dev !== st.dev || again.ino !== st.ino) throw new Error("changed while opened");
    }
    if (!within(realDir, opened)) throw new Error("leads out of its directory");
    const buf = Buffer.alloc(Math.min(limit + 1, Math.max(Number(st.size) + 1, 4096)));
    let chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > limit) throw new Error(`larger than ${limit} bytes`);
      chunks.push(Buffer.from(buf.subarray(0, bytesRead)));
    }
    const out = Buffer.concat(chunks, total);
    chunks = [];
    return { data: out, stats: st };
  } finally {
    await fh.close();
  }
}

function within(dir: string, file: string): boolean {
  const prefix = dir.endsWith(sep) ? dir : dir + sep;
  return file.startsWith(prefix) && file.length > prefix.length;
}

/**
 * Describes a file system error by its code and path-free message, never
 * with content.
 * @internal
 */
export function describe(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (typeof err?.code === "string" && typeof err.syscall === "string") {
    return `${err.syscall}: ${err.code}`;
  }
  return err instanceof Error ? err.message : String(e);
}
