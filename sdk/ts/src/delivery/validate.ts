// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import type { Delivery, Instrument } from "../gen/openfief/connector/v1/connector_pb.js";
import { Severity } from "../gen/openfief/connector/v1/connector_pb.js";
import { isDecimal, parseDecimal } from "./decimal.js";
import { isCurrency, isDate } from "./fields.js";

/**
 * The rules {@link validate} checks, by the names the shared conformance
 * vectors use; each {@link FieldError} names one of them.
 */
export const Rule = {
  /** A field that must be set is empty. */
  Required: "required",
  /** A date is not a real YYYY-MM-DD date. */
  NotDate: "not_date",
  /** A currency is not three upper-case letters. */
  NotCurrency: "not_currency",
  /** A decimal is not in the contract's form. */
  NotDecimal: "not_decimal",
  /** A transaction's source_id appears twice. */
  Duplicate: "duplicate",
  /** An instrument and a quantity are not set together. */
  InstrumentQuantity: "instrument_quantity",
  /** A rate is zero or negative. */
  NotPositive: "not_positive",
  /** An enum field holds an unspecified or unknown value. */
  UnknownEnum: "unknown_enum",
  /** An ISIN does not have an ISIN's shape. */
  NotISIN: "not_isin",
  /** An FX rate's quote currency is its base currency. */
  EqualsBase: "equals_base",
} as const;

/** One of the {@link Rule} values. */
export type Rule = (typeof Rule)[keyof typeof Rule];

/** What each rule says in an error message, as in the Go SDK. */
const ruleMessages: Record<Rule, string> = {
  required: "required",
  not_date: "not a YYYY-MM-DD date",
  not_currency: "not an ISO 4217 currency code",
  not_decimal: "not a decimal",
  duplicate: "appears more than once",
  instrument_quantity: "instrument and quantity must be set together",
  not_positive: "must be positive",
  unknown_enum: "unspecified or unknown value",
  not_isin: "not an ISIN: two letters, nine letters or digits, a digit",
  equals_base: "equals base_currency",
};

/**
 * FieldError is one field of a Delivery that breaks the contract's
 * conventions, named by its path such as
 * "transactions[2].postings[0].amount".
 */
export class FieldError extends Error {
  override name = "FieldError";
  constructor(
    /** The path of the field in the Delivery. */
    readonly field: string,
    /** The rule the field breaks. */
    readonly rule: Rule,
    detail = "",
  ) {
    super(`${field}: ${ruleMessages[rule]}${detail}`);
  }
}

/**
 * DeliveryInvalidError carries every {@link FieldError} of one Delivery, in
 * the order {@link validate} found them.
 */
export class DeliveryInvalidError extends Error {
  override name = "DeliveryInvalidError";
  constructor(readonly errors: readonly FieldError[]) {
    super(errors.map((e) => e.message).join("\n"));
  }
}

class Checker {
  readonly errs: FieldError[] = [];

  add(field: string, rule: Rule, detail = ""): void {
    this.errs.push(new FieldError(field, rule, detail));
  }

  required(field: string, v: string): boolean {
    if (v === "") {
      this.add(field, Rule.Required);
      return false;
    }
    return true;
  }

  date(field: string, v: string): void {
    if (this.required(field, v) && !isDate(v)) this.add(field, Rule.NotDate);
  }

  optionalDate(field: string, v: string): void {
    if (v !== "" && !isDate(v)) this.add(field, Rule.NotDate);
  }

  currency(field: string, v: string): void {
    if (this.required(field, v) && !isCurrency(v)) this.add(field, Rule.NotCurrency);
  }

  optionalCurrency(field: string, v: string): void {
    if (v !== "" && !isCurrency(v)) this.add(field, Rule.NotCurrency);
  }

  decimal(field: string, v: string): void {
    if (this.required(field, v) && !isDecimal(v)) this.add(field, Rule.NotDecimal);
  }

  positive(field: string, v: string): void {
    if (!this.required(field, v)) return;
    if (!isDecimal(v)) {
      this.add(field, Rule.NotDecimal);
    } else if (parseDecimal(v).sign() <= 0) {
      this.add(field, Rule.NotPositive);
    }
  }

  instrument(field: string, inst: Instrument): void {
    if (inst.isin === "" && inst.symbol === "") {
      this.add(field, Rule.Required, ": isin or symbol");
    }
    if (inst.isin !== "" && !isISINShape(inst.isin)) this.add(field + ".isin", Rule.NotISIN);
    this.optionalCurrency(field + ".currency", inst.currency);
  }

  /** Checks an instrument and quantity that must be set together. */
  holding(field: string, inst: Instrument | undefined, quantity: string): void {
    if (inst === undefined && quantity === "") return;
    if (inst === undefined || quantity === "") {
      this.add(field, Rule.InstrumentQuantity);
      return;
    }
    this.instrument(field + ".instrument", inst);
    this.decimal(field + ".quantity", quantity);
  }
}

function isISINShape(s: string): boolean {
  return /^[A-Z]{2}[A-Z0-9]{9}[0-9]$/.test(s);
}

/**
 * Checks every field of d against the contract's conventions and returns
 * every problem at once, each a {@link FieldError} naming its field:
 * decimals, YYYY-MM-DD dates, ISO 4217 codes, required IDs, unique
 * transaction source IDs, and instruments set together with quantities. It
 * does not check that postings balance; the Builder reports that as an ingest
 * problem. An empty list means the Delivery is valid.
 */
export function validate(d: Delivery): FieldError[] {
  const c = new Checker();
  c.required("batch_id", d.batchId);
  if (d.institution === undefined) {
    c.add("institution", Rule.Required);
  } else {
    c.required("institution.id", d.institution.id);
  }
  const seen = new Set<string>();
  d.transactions.forEach((t, i) => {
    const f = `transactions[${i}]`;
    if (c.required(f + ".source_id", t.sourceId)) {
      if (seen.has(t.sourceId)) c.add(f + ".source_id", Rule.Duplicate);
      seen.add(t.sourceId);
    }
    c.date(f + ".date", t.date);
    c.optionalDate(f + ".value_date", t.valueDate);
    if (t.postings.length === 0) c.add(f + ".postings", Rule.Required);
    t.postings.forEach((p, j) => {
      const pf = `${f}.postings[${j}]`;
      c.required(pf + ".account_id", p.accountId);
      c.decimal(pf + ".amount", p.amount);
      c.currency(pf + ".currency", p.currency);
      c.holding(pf, p.instrument, p.quantity);
    });
  });
  d.balanceAssertions.forEach((b, i) => {
    const f = `balance_assertions[${i}]`;
    c.required(f + ".account_id", b.accountId);
    c.date(f + ".date", b.date);
    c.holding(f, b.instrument, b.quantity);
    if (b.instrument === undefined || b.amount !== "") {
      c.decimal(f + ".amount", b.amount);
      c.currency(f + ".currency", b.currency);
    }
  });
  d.problems.forEach((p, i) => {
    const f = `problems[${i}]`;
    if (p.severity === Severity.UNSPECIFIED || Severity[p.severity] === undefined) {
      c.add(f + ".severity", Rule.UnknownEnum);
    }
    c.required(f + ".code", p.code);
    c.required(f + ".message", p.message);
  });
  d.prices.forEach((p, i) => {
    const f = `prices[${i}]`;
    if (p.instrument === undefined) {
      c.add(f + ".instrument", Rule.Required);
    } else {
      c.instrument(f + ".instrument", p.instrument);
    }
    c.date(f + ".date", p.date);
    c.decimal(f + ".price", p.price);
    c.currency(f + ".currency", p.currency);
  });
  d.fxRates.forEach((r, i) => {
    const f = `fx_rates[${i}]`;
    c.date(f + ".date", r.date);
    c.currency(f + ".base_currency", r.baseCurrency);
    c.currency(f + ".quote_currency", r.quoteCurrency);
    if (r.baseCurrency !== "" && r.baseCurrency === r.quoteCurrency) {
      c.add(f + ".quote_currency", Rule.EqualsBase);
    }
    c.positive(f + ".rate", r.rate);
  });
  d.indexReadings.forEach((r, i) => {
    const f = `index_readings[${i}]`;
    c.required(f + ".index_id", r.indexId);
    c.date(f + ".date", r.date);
    c.decimal(f + ".value", r.value);
  });
  return c.errs;
}
