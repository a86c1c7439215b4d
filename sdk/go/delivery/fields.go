// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import "time"

// DateLayout is the contract's date format, YYYY-MM-DD.
const DateLayout = time.DateOnly

// IsDate reports whether s is a real calendar date written YYYY-MM-DD:
// "2026-02-29" is not one.
func IsDate(s string) bool {
	if len(s) != len(DateLayout) {
		return false
	}
	t, err := time.Parse(DateLayout, s)
	return err == nil && t.Format(DateLayout) == s
}

// Date writes t's calendar date in UTC as YYYY-MM-DD.
func Date(t time.Time) string { return t.UTC().Format(DateLayout) }

// IsCurrency reports whether code has the shape of an ISO 4217 alphabetic
// code: exactly three upper-case ASCII letters. It does not check
// that the code is currently assigned, so a connector can deliver a
// currency newer than the SDK.
func IsCurrency(code string) bool {
	if len(code) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	return true
}
