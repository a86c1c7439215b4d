// The plugin's whole program: read the instance's config (already checked
// against manifest.json's configSchema by the operator) and serve the
// connector until SIGTERM. serveConnector verifies that every call comes
// from the core and lets the calls in flight finish when stopped.

import { loadConfig, serveConnector } from "@openfief/sdk";
import { connector, parseConfig } from "./plugin.js";

try {
  await serveConnector(connector(parseConfig(loadConfig())));
} catch (e) {
  console.error((e as Error).message);
  process.exit(1);
}
