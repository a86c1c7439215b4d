// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { isIP } from "node:net";

/** The environment the operator gives every plugin pod. */
export const Env = {
  /**
   * The core Service's ClusterIP and port, such as "10.96.0.10:8080";
   * plugins have no DNS.
   */
  CoreAddress: "OPENFIEF_CORE_ADDRESS",
  /** The port the plugin serves the core on. */
  ListenPort: "OPENFIEF_LISTEN_PORT",
  /**
   * The plugin instance's config, a JSON document the operator checked
   * against the manifest's JSON Schema.
   */
  Config: "OPENFIEF_CONFIG",
  /** The plugin instance's name. */
  Instance: "OPENFIEF_INSTANCE",
  /** The core's ServiceAccount username, the subject of every token the core sends. */
  CoreSubject: "OPENFIEF_CORE_SUBJECT",
  /** The directory where the openfief-sa-jwks ConfigMap is mounted. */
  SAJWKSDir: "OPENFIEF_SA_JWKS_DIR",
  /** The path of the openfief-core token. */
  TokenFile: "OPENFIEF_TOKEN_FILE",
  /** The path of the openfief-egress token; set only when an egress host is granted. */
  EgressTokenFile: "OPENFIEF_EGRESS_TOKEN_FILE",
  /** The egress proxy's URL; set only when an egress host is granted. */
  HTTPSProxy: "HTTPS_PROXY",
} as const;

/** The plugin port when OPENFIEF_LISTEN_PORT is unset, the operator's default. */
export const DEFAULT_LISTEN_PORT = 8080;

/** Where the operator mounts the projected openfief-core token of every plugin pod. */
export const DEFAULT_TOKEN_PATH = "/var/run/secrets/openfief/token";

/** Where the operator mounts the openfief-sa-jwks ConfigMap in every plugin pod. */
export const DEFAULT_SA_JWKS_DIR = "/var/run/secrets/openfief-sa-jwks";

/** The environment the functions read: process.env unless a test passes its own. */
export type Environment = Readonly<Record<string, string | undefined>>;

/**
 * Accepts a decimal port from 1 to 65535, without sign or leading zero.
 * @internal
 */
export function parsePort(s: string): number {
  const p = /^[0-9]{1,5}$/.test(s) ? Number(s) : NaN;
  if (!(p >= 1 && p <= 65535) || String(p) !== s) {
    throw new Error(`port ${JSON.stringify(s)} is not a number from 1 to 65535`);
  }
  return p;
}

/**
 * Returns the base URL of the core's API from OPENFIEF_CORE_ADDRESS:
 * http://<ClusterIP>:<port>. The address must be an IP literal with a port,
 * because plugins have no DNS.
 */
export function coreURL(env: Environment = process.env): URL {
  try {
    return parseCoreAddress(env[Env.CoreAddress] ?? "");
  } catch (e) {
    throw new Error(`${Env.CoreAddress}: ${(e as Error).message}`);
  }
}

function parseCoreAddress(s: string): URL {
  if (s === "") throw new Error("not set");
  let host: string;
  let port: string;
  const bracketed = /^\[([^\]]*)\]:([^:]*)$/.exec(s);
  if (bracketed) {
    host = bracketed[1] ?? "";
    port = bracketed[2] ?? "";
    // Brackets may hold either kind of address, as Go's net.SplitHostPort
    // allows; never a zone.
    if (isIP(host) === 0 || host.includes("%")) {
      throw new Error(`${JSON.stringify(s)}: host must be an IP address`);
    }
  } else {
    const i = s.lastIndexOf(":");
    if (i < 0 || s.indexOf(":") !== i) {
      throw new Error(`${JSON.stringify(s)} is not <ip>:<port>`);
    }
    host = s.slice(0, i);
    port = s.slice(i + 1);
    if (isIP(host) !== 4) throw new Error(`${JSON.stringify(s)}: host must be an IP address`);
  }
  try {
    parsePort(port);
  } catch (e) {
    throw new Error(`${JSON.stringify(s)}: ${(e as Error).message}`);
  }
  return new URL(`http://${isIP(host) === 6 ? `[${host}]` : host}:${port}`);
}

/**
 * Returns the port a plugin serves the core on, from OPENFIEF_LISTEN_PORT, or
 * 8080 when it is unset.
 */
export function listenPort(env: Environment = process.env): number {
  const s = env[Env.ListenPort] ?? "";
  if (s === "") return DEFAULT_LISTEN_PORT;
  try {
    return parsePort(s);
  } catch (e) {
    throw new Error(`${Env.ListenPort}: ${(e as Error).message}`);
  }
}

/**
 * Returns the plugin instance's config from OPENFIEF_CONFIG, parsed as JSON.
 * An unset or blank variable is the empty object {}, as in the operator's
 * schema check. The operator has checked it against the manifest's JSON
 * Schema; a plugin still checks the fields it reads. Numbers are JavaScript
 * numbers: write exact amounts in the config as strings.
 */
export function loadConfig(env: Environment = process.env): unknown {
  const raw = env[Env.Config] ?? "";
  if (/^[ \t\r\n]*$/.test(raw)) return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch (e) {
    throw new Error(`${Env.Config}: ${(e as Error).message}`);
  }
}
