// The plugin's whole program: read the instance's config (already checked
// against manifest.json's configSchema by the operator) and serve the view
// until SIGTERM. serveView verifies that every call comes from the core and
// lets the calls in flight finish when stopped.

import { loadConfig, serveView } from "@openfief/sdk";
import { parseConfig, view } from "./plugin.js";

try {
  await serveView(view(parseConfig(loadConfig()), (line) => console.log(line)));
} catch (e) {
  console.error((e as Error).message);
  process.exit(1);
}
