// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  BalanceAssertionSchema,
  DeliverySchema,
  FxRateSchema,
  IndexReadingSchema,
  IngestProblemSchema,
  InstitutionSchema,
  PriceSchema,
  Severity,
  TransactionSchema,
  type Delivery,
  type Transaction,
} from "../gen/openfief/connector/v1/connector_pb.js";
import { Decimal, isDecimal, parseDecimal } from "./decimal.js";
import { compareCodePoints, sortDelivery } from "./sort.js";
import { DeliveryInvalidError, validate } from "./validate.js";

/**
 * The code of the problem {@link DeliveryBuilder.build} reports for a
 * transaction whose postings do not add up to zero in some currency.
 */
export const PROBLEM_UNBALANCED = "unbalanced_transaction";

/**
 * DeliveryBuilder collects what a connector maps from one report and builds
 * the Delivery: it reports problems, checks that every transaction's postings
 * balance per currency, sorts, and validates every field. Each method takes a
 * message or the plain object {@link create} accepts for it.
 */
export class DeliveryBuilder {
  private readonly d: Delivery;
  private built = false;

  /** Starts the Delivery answering the request with batchId, for institution. */
  constructor(batchId: string, institution: MessageInitShape<typeof InstitutionSchema>) {
    this.d = create(DeliverySchema, {
      batchId,
      institution: create(InstitutionSchema, institution),
    });
  }

  /** Adds a mapped transaction. */
  transaction(t: MessageInitShape<typeof TransactionSchema>): this {
    this.d.transactions.push(create(TransactionSchema, t));
    return this;
  }

  /** Adds a balance the institution reported. */
  balance(a: MessageInitShape<typeof BalanceAssertionSchema>): this {
    this.d.balanceAssertions.push(create(BalanceAssertionSchema, a));
    return this;
  }

  /** Adds a quote of an instrument. */
  price(p: MessageInitShape<typeof PriceSchema>): this {
    this.d.prices.push(create(PriceSchema, p));
    return this;
  }

  /** Adds an exchange rate. */
  fxRate(r: MessageInitShape<typeof FxRateSchema>): this {
    this.d.fxRates.push(create(FxRateSchema, r));
    return this;
  }

  /** Adds a published index value. */
  indexReading(r: MessageInitShape<typeof IndexReadingSchema>): this {
    this.d.indexReadings.push(create(IndexReadingSchema, r));
    return this;
  }

  /**
   * Reports something the owner should look at although nothing is missing
   * from the delivery. location points into the report, such as "line 17",
   * or is empty. Never put a credential in a problem.
   */
  warn(code: string, location: string, message: string): this {
    return this.problem(Severity.WARNING, code, "", location, message);
  }

  /**
   * Reports something the institution reported that is missing from the
   * delivery, such as a row the connector could not read.
   */
  error(code: string, location: string, message: string): this {
    return this.problem(Severity.ERROR, code, "", location, message);
  }

  /** Reports a problem with the transaction sourceId, which the delivery still carries. */
  transactionError(sourceId: string, code: string, message: string): this {
    return this.problem(Severity.ERROR, code, sourceId, "", message);
  }

  private problem(
    severity: Severity,
    code: string,
    sourceId: string,
    location: string,
    message: string,
  ): this {
    this.d.problems.push(
      create(IngestProblemSchema, { severity, code, sourceId, location, message }),
    );
    return this;
  }

  /**
   * Finishes the Delivery with the watermark the core stores once it is
   * imported. It reports an ERROR problem for every transaction whose
   * postings do not add up to zero per currency, sorts the lists
   * ({@link sortDelivery}), and throws a {@link DeliveryInvalidError} when any
   * field breaks the contract ({@link validate}). The builder must not be used
   * afterwards.
   */
  build(watermark: string): Delivery {
    if (this.built) throw new Error("DeliveryBuilder: build was already called");
    this.built = true;
    const d = this.d;
    d.watermark = watermark;
    for (const t of d.transactions) {
      const off = imbalance(t);
      if (off.length > 0) {
        this.transactionError(
          t.sourceId,
          PROBLEM_UNBALANCED,
          `postings do not balance: ${off.join(", ")}`,
        );
      }
    }
    sortDelivery(d);
    const errs = validate(d);
    if (errs.length > 0) throw new DeliveryInvalidError(errs);
    return d;
  }
}

/**
 * Returns, for each currency in which t's posting amounts do not add up to
 * zero, the remainder written "<amount> <currency>", sorted by currency.
 * Amounts that are not decimals are skipped; {@link validate} reports them.
 */
export function imbalance(t: Transaction): string[] {
  const sums = new Map<string, Decimal>();
  for (const p of t.postings) {
    if (!isDecimal(p.amount)) continue;
    sums.set(p.currency, (sums.get(p.currency) ?? Decimal.ZERO).add(parseDecimal(p.amount)));
  }
  const off: string[] = [];
  for (const [cur, sum] of sums) {
    if (!sum.isZero()) off.push(`${sum.toString()} ${cur}`);
  }
  const key = (s: string) => s.slice(s.lastIndexOf(" "));
  return off.sort((a, b) => compareCodePoints(key(a), key(b)));
}
