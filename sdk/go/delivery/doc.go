// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// Package delivery helps a connector build a Delivery that follows the
// connector contract's conventions: exact decimals (Decimal,
// ParseDecimal, ParseNumber), ISO 4217 currency codes (IsCurrency),
// YYYY-MM-DD dates (IsDate, Date), a deterministic order (Sort), a check of
// every field (Validate) and problem reporting with balanced postings
// (Builder).
//
// Like the rest of the SDK it is Apache-2.0 and imports nothing from the
// core.
package delivery
