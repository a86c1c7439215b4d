// Package core is openfief-core's plugin-facing half (OF-8): it follows the
// Plugins (WatchPlugins) and calls Sync on every one that runs as a
// connector, on a per-instance schedule with jitter, retries and the stored
// watermark (Scheduler, D-49, D-18), with a TokenRequest token of the
// core's ServiceAccount for that instance's audience (Tokens, Caller, D-59);
// it streams an owner's file to ImportFile; it refuses a delivery outside
// the plugin's data tiers (CheckTiers, OF-11) and imports the rest whole
// into internal/core/store. It serves plugins behind their openfief-core
// token (internal/core/auth, D-27) and the owner an API for status and
// imports, reached through the API server's service proxy (docs/core.md).
package core
