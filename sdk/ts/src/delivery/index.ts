// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

/**
 * Helps a connector build a Delivery that follows the connector contract's
 * conventions: exact decimals ({@link Decimal}, {@link parseDecimal},
 * {@link parseNumber}), ISO 4217 currency codes ({@link isCurrency}),
 * YYYY-MM-DD dates ({@link isDate}, {@link date}), a deterministic order
 * ({@link sortDelivery}), a check of every field ({@link validate}) and
 * problem reporting with balanced postings ({@link DeliveryBuilder}). The
 * rules are those of the Go SDK's delivery package; shared conformance
 * vectors keep the two in step.
 *
 * @module
 */
export {
  Decimal,
  MAX_DECIMAL_DIGITS,
  MAX_EXPONENT,
  NotDecimalError,
  isDecimal,
  mustDecimal,
  parseDecimal,
  parseNumber,
} from "./decimal.js";
export { date, isCurrency, isDate } from "./fields.js";
export { compareCodePoints, sortDelivery } from "./sort.js";
export { DeliveryInvalidError, FieldError, Rule, validate } from "./validate.js";
export { DeliveryBuilder, PROBLEM_UNBALANCED, imbalance } from "./builder.js";
