// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { basename, dirname, normalize } from "node:path";
import { DEFAULT_TOKEN_PATH, Env, type Environment } from "./env.js";
import { describe, readInDir } from "./files.js";

/**
 * Bounds what a token file may hold. Kubernetes tokens are a few kilobytes;
 * anything far larger is not a token.
 */
const MAX_TOKEN_BYTES = 64 << 10;

/**
 * TokenFile is a projected ServiceAccount token on disk, such as the
 * openfief-core token or the openfief-egress token. The kubelet rotates such
 * tokens by swapping symbolic links inside the file's directory, so
 * {@link TokenFile.read} opens the file afresh on every call; a link may move
 * within the directory but never lead out of it.
 */
export class TokenFile {
  private readonly dir: string;
  private readonly name: string;

  /**
   * Returns the TokenFile at path. It only checks that path names a file
   * inside a directory; the file is read by read.
   */
  constructor(path: string) {
    if (path === "") throw new Error("token file: empty path");
    const clean = normalize(path);
    const name = basename(clean);
    if (name === "" || name === "." || name === ".." || clean.endsWith("/")) {
      throw new Error(`token file ${JSON.stringify(path)}: not a file name`);
    }
    this.dir = dirname(clean);
    this.name = name;
  }

  /** The token file's path, for messages; it is not a secret. */
  get path(): string {
    return this.dir === "." ? this.name : `${this.dir}/${this.name}`.replace(/^\/\//, "/");
  }

  /**
   * Returns the token the file holds now, with surrounding white space
   * removed. It reads the file on every call, so a token the kubelet rotated
   * is used at once. Errors name the file, never its content.
   */
  async read(): Promise<string> {
    let b: Buffer;
    try {
      b = await readInDir(this.dir, this.name, MAX_TOKEN_BYTES);
    } catch (e) {
      throw new Error(`token file ${this.path}: ${describe(e)}`);
    }
    const token = b.toString("latin1").replace(/^[\t\n\v\f\r ]+|[\t\n\v\f\r ]+$/g, "");
    if (token === "") throw new Error(`token file ${this.path}: token file is empty`);
    for (let i = 0; i < token.length; i++) {
      const c = token.charCodeAt(i);
      // A token goes into an HTTP header or a URL's user info: only printable
      // ASCII without spaces may appear in it.
      if (c <= 0x20 || c >= 0x7f) {
        throw new Error(`token file ${this.path}: holds a byte a token never contains`);
      }
    }
    return token;
  }
}

/**
 * Returns the plugin's openfief-core token file: the path in
 * OPENFIEF_TOKEN_FILE, or the default path when that is unset.
 */
export function coreTokenFile(env: Environment = process.env): TokenFile {
  return new TokenFile(env[Env.TokenFile] || DEFAULT_TOKEN_PATH);
}
