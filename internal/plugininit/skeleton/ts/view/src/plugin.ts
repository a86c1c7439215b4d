// The view: it keeps the pages of entries the core exports. main.ts serves
// it.

import type { ViewHandler } from "@openfief/sdk";
import type { Entry } from "@openfief/sdk/view/v1";

/** The instance's config, as manifest.json's configSchema describes it (none yet). */
export type Config = Record<string, never>;

/** Reads the config. */
export function parseConfig(raw: unknown): Config {
  if (typeof raw !== "object" || raw === null || Object.keys(raw).length > 0) {
    throw new Error("config: this view takes no settings yet");
  }
  return {};
}

/**
 * The view. The core moves the view's place only once Export answered OK, so
 * a page can come again (after a restart, or a call cut by a timeout): the
 * view keeps, for each kind of entry, the largest sequence it kept, and skips
 * what it already has. This one writes a line per page with write; a real
 * view writes the entries where the owner reads them (through the egress
 * proxy, with newEgressClient()) and keeps its place there, not in memory.
 */
export function view(_config: Config, write: (line: string) => void): ViewHandler {
  const kept = new Map<string, bigint>();
  return {
    async export(page) {
      let added = 0;
      let skipped = 0;
      for (const e of page.entries) {
        const kind = entryKind(e);
        if (e.sequence <= (kept.get(kind) ?? 0n)) {
          skipped++;
          continue;
        }
        kept.set(kind, e.sequence);
        added++;
      }
      write(`export: kept ${added} entries, skipped ${skipped} already kept`);
      return {};
    },
  };
}

/** Names the kind of an entry; the core numbers each kind apart. */
function entryKind(e: Entry): string {
  return e.entry.case ?? "unknown";
}
