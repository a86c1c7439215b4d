// The connector: it answers the core's calls. main.ts serves it.

import type { ConnectorHandler } from "@openfief/sdk";
import { DeliveryBuilder, isCurrency } from "@openfief/sdk/delivery";

/** Where the connector's data comes from. Name yours. */
export const INSTITUTION = { id: "example-bank", name: "Example Bank" };

/** The instance's config, as manifest.json's configSchema describes it. */
export interface Config {
  /** The currency the example rate is quoted in; USD by default. */
  quoteCurrency: string;
}

/** Reads the config, checking again the fields it uses. */
export function parseConfig(raw: unknown): Config {
  const o = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const quote = o["quoteCurrency"] ?? "USD";
  if (typeof quote !== "string" || !isCurrency(quote) || quote === "EUR") {
    throw new Error("config quoteCurrency: not an ISO 4217 code other than EUR");
  }
  return { quoteCurrency: quote };
}

/**
 * The connector. Sync answers one sync with a Delivery: the request's batch
 * ID, the institution, what was read, and the watermark the core passes back
 * next time. This one delivers a made-up exchange rate. A real connector
 * reads its institution through the egress proxy (newEgressClient(), with the
 * host listed in manifest.json's "egress"). ImportFile answers Unimplemented
 * until you write it (see receiveFile).
 */
export function connector(config: Config): ConnectorHandler {
  return {
    async sync(req) {
      const b = new DeliveryBuilder(req.batchId, INSTITUTION);
      b.fxRate({
        date: "2026-01-02",
        baseCurrency: "EUR",
        quoteCurrency: config.quoteCurrency,
        rate: "1.0350",
        sourceRef: "example",
      });
      // build checks every field by the contract's rules.
      return { delivery: b.build("2026-01-02") };
    },
  };
}
