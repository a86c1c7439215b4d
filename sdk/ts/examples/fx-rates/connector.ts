// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// An example connector written with @openfief/sdk: exchange rates from a
// (made-up) bank's API, reached through the egress proxy, and from CSV
// statement files imported over ImportFile.

import { Code, ConnectError } from "@connectrpc/connect";
import type { EgressClient, ConnectorHandler } from "@openfief/sdk";
import { receiveFile } from "@openfief/sdk";
import { DeliveryBuilder, isCurrency, isDate, parseNumber } from "@openfief/sdk/delivery";

/** The institution this connector reads, as its manifest grants egress to it. */
export const INSTITUTION = { id: "example-bank", name: "Example Bank" };

/** The connector's config, which the operator checked against its manifest's schema. */
export interface Config {
  /** The host of the bank's API; the egress allow-list must name it. */
  host: string;
  /** The currency the rates are quoted in. */
  quote: string;
}

/** Reads the config, checking again the fields it uses. */
export function parseConfig(raw: unknown): Config {
  const o = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const host = typeof o["host"] === "string" ? o["host"] : "rates.example-bank.test";
  const quote = typeof o["quote"] === "string" ? o["quote"] : "PLN";
  if (!/^[a-z0-9.-]+$/.test(host)) throw new Error("config host: not a host name");
  if (!isCurrency(quote)) throw new Error("config quote: not an ISO 4217 code");
  return { host, quote };
}

/** The largest statement file the connector imports. */
const MAX_FILE_BYTES = 1 << 20;

/** One rate as the bank's API publishes it. */
interface Rate {
  date: string;
  currency: string;
  rate: string;
}

/**
 * The connector: Sync asks the bank for the rates after the watermark (the
 * last date it delivered); ImportFile reads a CSV file of date,currency,rate
 * lines.
 */
export function fxConnector(config: Config, egress: EgressClient): ConnectorHandler {
  return {
    async sync(req) {
      const since = isDate(req.watermark) ? req.watermark : "";
      const url = `https://${config.host}/rates?quote=${config.quote}&since=${since}`;
      const res = await egress.request(url, { maxResponseBytes: 4 << 20 }).catch((e: unknown) => {
        // The bank could not be reached: Unavailable too, as the contract
        // asks, not the Unknown a thrown Error would give the core.
        throw new ConnectError(`reach the bank: ${(e as Error).message}`, Code.Unavailable);
      });
      if (res.status !== 200) {
        // Unavailable: the core tries the batch again later.
        throw new ConnectError(`the bank answered ${res.status}`, Code.Unavailable);
      }
      const rates = JSON.parse(res.body.toString("utf8")) as unknown;
      if (!Array.isArray(rates))
        throw new ConnectError("the bank's answer is not a list", Code.Unavailable);
      const b = new DeliveryBuilder(req.batchId, INSTITUTION);
      let latest = req.watermark;
      rates.forEach((r: unknown, i) => {
        const fields = (typeof r === "object" && r !== null ? r : {}) as Partial<Rate>;
        const rate = mapRate(b, fields, config.quote, `rates[${i}]`);
        if (rate !== undefined && rate.date > latest) latest = rate.date;
      });
      return { delivery: b.build(latest) };
    },

    async importFile(requests) {
      const file = await receiveFile(requests, MAX_FILE_BYTES);
      const b = new DeliveryBuilder(file.header.batchId, INSTITUTION);
      const lines = Buffer.from(file.content).toString("utf8").split(/\r?\n/);
      lines.forEach((line, i) => {
        if (line.trim() === "" || i === 0) return; // the header line
        const [date, currency, rate] = line.split(",");
        mapRate(b, { date, currency, rate }, config.quote, `line ${i + 1}`);
      });
      return { delivery: b.build("") };
    },
  };
}

/**
 * Adds one rate to the delivery, or an error problem naming where it was
 * when it cannot be read. Rates are parsed exactly, never as a JavaScript
 * number.
 */
function mapRate(
  b: DeliveryBuilder,
  r: Partial<Rate>,
  quote: string,
  where: string,
): Rate | undefined {
  const { date, currency, rate } = r;
  if (
    typeof date !== "string" ||
    !isDate(date) ||
    typeof currency !== "string" ||
    !isCurrency(currency)
  ) {
    b.error("unreadable_rate", where, "no date or currency");
    return undefined;
  }
  let exact: string;
  try {
    exact = parseNumber(String(rate)).toString();
  } catch {
    b.error("unreadable_rate", where, `the ${currency} rate is not a number`);
    return undefined;
  }
  b.fxRate({ date, baseCurrency: currency, quoteCurrency: quote, rate: exact });
  return { date, currency, rate: exact };
}
