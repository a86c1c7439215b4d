// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { statSync, type BigIntStats } from "node:fs";

/**
 * How old, in milliseconds, a file's last change must be before its stamp
 * alone may stand for its content. A write lands in the file's timestamps
 * rounded down to the file system's granularity (a kernel tick on tmpfs and
 * ext4, up to two seconds on the coarsest), so two writes within one tick
 * can leave the same stamp; a change older than this cannot share its stamp
 * with any later write. Until then the file is read on every call, as if it
 * had no stamp.
 * @internal
 */
export const STAMP_SETTLE_MS = 2000;

/**
 * One version of a file as stat reports it: device, inode, size,
 * modification and change times in nanoseconds. The kubelet's atomic writer
 * puts every update into new files (a new inode behind the swapped ..data
 * link), and an in-place write moves the change time, which no unprivileged
 * caller can set back.
 * @internal
 */
export interface FileStamp {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

/**
 * The stamp of st, or undefined outside Linux, where plugins run: there the
 * verifier reads its files on every call, as the Go SDK does.
 * @internal
 */
export function stampOf(
  st: BigIntStats,
  platform: string = process.platform,
): FileStamp | undefined {
  if (platform !== "linux") return undefined;
  return { dev: st.dev, ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs };
}

/**
 * Whether s may stand for its file's content at nowMs (milliseconds since
 * the Unix epoch): its last change is at least STAMP_SETTLE_MS older, so
 * any later write gets a later change time and a different stamp.
 * @internal
 */
export function settled(s: FileStamp | undefined, nowMs: number): boolean {
  if (s === undefined) return false;
  const limit = BigInt(Math.floor(nowMs - STAMP_SETTLE_MS)) * 1_000_000n;
  return s.ctimeNs <= limit && s.mtimeNs <= limit;
}

/**
 * Whether the file at path has the stamp s now. A file that cannot be
 * stat'ed counts as changed, so the read that follows reports the error.
 * The stat follows the path's links, in one system call made in place (no
 * trip through libuv's thread pool: it reads the inode, never the data):
 * a stamp names a device and inode, so an equal stamp means the path leads
 * to the very file that was read through readInDir's checks, and has not
 * changed since; any other file, wherever a link leads, differs and is read
 * through them again.
 * @internal
 */
export function unchanged(path: string, s: FileStamp): boolean {
  let st: BigIntStats | undefined;
  try {
    st = statSync(path, { bigint: true, throwIfNoEntry: false });
  } catch {
    return false;
  }
  return (
    st !== undefined &&
    st.dev === s.dev &&
    st.ino === s.ino &&
    st.size === s.size &&
    st.mtimeNs === s.mtimeNs &&
    st.ctimeNs === s.ctimeNs
  );
}
