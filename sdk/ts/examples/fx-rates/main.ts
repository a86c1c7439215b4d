// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The example connector's whole program: read the config, build the egress
// client, serve until SIGTERM. Everything else is the SDK's.

import { loadConfig, newEgressClient, serveConnector } from "@openfief/sdk";
import { fxConnector, parseConfig } from "./connector.js";

try {
  await serveConnector(fxConnector(parseConfig(loadConfig()), newEgressClient()));
} catch (e) {
  // The SDK's errors never hold a token.
  console.error(`fx-rates: ${(e as Error).message}`);
  process.exit(1);
}
