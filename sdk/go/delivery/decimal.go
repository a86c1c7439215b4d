// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// maxDecimalDigits bounds the digits a parsed decimal may have, so outside
// input cannot make arithmetic arbitrarily slow.
const maxDecimalDigits = 120

// maxExponent bounds the exponent ParseNumber accepts.
const maxExponent = 100

// Decimal is an exact decimal number: amounts, prices, rates and quantities
// are never floating point in OpenFief. Its value is unscaled ×
// 10^-scale; the zero value is 0. Operations never round, and String keeps
// the scale, so a rate written "4.2840" by its publisher stays "4.2840".
type Decimal struct {
	unscaled *big.Int // nil means 0
	scale    int32    // digits after the point, never negative
}

// ErrNotDecimal is wrapped by the parsers' errors for input that is not a
// decimal they accept.
var ErrNotDecimal = errors.New("not a decimal")

// ParseDecimal reads a decimal in the contract's form: an optional
// '-', one or more digits, and optionally '.' followed by one or more
// digits. A '+', an exponent, a thousands separator or white space is an
// error.
func ParseDecimal(s string) (Decimal, error) {
	if !isContractDecimal(s) {
		return Decimal{}, fmt.Errorf("%w: %q (want digits with an optional '-' and '.')", ErrNotDecimal, truncate(s))
	}
	return parseDigits(s)
}

// IsDecimal reports whether s is a decimal string in the contract's form.
func IsDecimal(s string) bool { return isContractDecimal(s) }

func isContractDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasPoint := strings.Cut(s, ".")
	if !allDigits(intPart) || (hasPoint && !allDigits(frac)) {
		return false
	}
	return len(intPart)+len(frac) <= maxDecimalDigits
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseDigits converts a string already known to be [-]digits[.digits].
func parseDigits(s string) (Decimal, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	u, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return Decimal{}, fmt.Errorf("%w: %q", ErrNotDecimal, truncate(s))
	}
	if neg {
		u.Neg(u)
	}
	return Decimal{unscaled: u, scale: int32(len(frac))}, nil
}

// ParseNumber reads a number as institutions write it, exactly: the
// contract's form, plus a leading '+' and an exponent ("1.5E-3"), as in a
// JSON number or an XML decimal. Use it on json.Number or XML attribute
// text instead of ever going through float64.
func ParseNumber(s string) (Decimal, error) {
	bad := fmt.Errorf("%w: %q", ErrNotDecimal, truncate(s))
	mant, exp, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp, hasExp = s[:i], s[i+1:], true
	}
	unsigned := strings.TrimPrefix(mant, "+")
	if (unsigned != mant && strings.HasPrefix(unsigned, "-")) || !isContractDecimal(unsigned) {
		return Decimal{}, bad
	}
	d, err := parseDigits(unsigned)
	if err != nil {
		return Decimal{}, bad
	}
	if !hasExp {
		return d, nil
	}
	digits := strings.TrimLeft(exp, "+-")
	if len(exp)-len(digits) > 1 || !allDigits(digits) || len(digits) > 3 {
		return Decimal{}, bad
	}
	e, err := strconv.Atoi(exp)
	if err != nil || e > maxExponent || e < -maxExponent {
		return Decimal{}, bad
	}
	return d.shift(int32(e)), nil
}

// shift multiplies d by 10^e exactly.
func (d Decimal) shift(e int32) Decimal {
	if e <= d.scale {
		return Decimal{unscaled: d.int(), scale: d.scale - e}
	}
	u := new(big.Int).Mul(d.int(), pow10(e-d.scale))
	return Decimal{unscaled: u, scale: 0}
}

// MustDecimal is ParseDecimal for constants in code; it panics on a string
// that is not a decimal.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

func (d Decimal) int() *big.Int {
	if d.unscaled == nil {
		return new(big.Int)
	}
	return d.unscaled
}

func pow10(n int32) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// aligned returns both unscaled values at the larger of the two scales.
func aligned(a, b Decimal) (x, y *big.Int, scale int32) {
	x, y, scale = a.int(), b.int(), a.scale
	switch {
	case a.scale < b.scale:
		x, scale = new(big.Int).Mul(x, pow10(b.scale-a.scale)), b.scale
	case b.scale < a.scale:
		y = new(big.Int).Mul(y, pow10(a.scale-b.scale))
	}
	return x, y, scale
}

// Add returns d + e exactly, at the larger of the two scales.
func (d Decimal) Add(e Decimal) Decimal {
	x, y, scale := aligned(d, e)
	return Decimal{unscaled: new(big.Int).Add(x, y), scale: scale}
}

// Sub returns d - e exactly, at the larger of the two scales.
func (d Decimal) Sub(e Decimal) Decimal {
	x, y, scale := aligned(d, e)
	return Decimal{unscaled: new(big.Int).Sub(x, y), scale: scale}
}

// Mul returns d × e exactly; its scale is the sum of theirs.
func (d Decimal) Mul(e Decimal) Decimal {
	return Decimal{unscaled: new(big.Int).Mul(d.int(), e.int()), scale: d.scale + e.scale}
}

// Neg returns -d.
func (d Decimal) Neg() Decimal {
	return Decimal{unscaled: new(big.Int).Neg(d.int()), scale: d.scale}
}

// Cmp compares d and e by value, so 1.50 equals 1.5: -1, 0 or +1.
func (d Decimal) Cmp(e Decimal) int {
	x, y, _ := aligned(d, e)
	return x.Cmp(y)
}

// Sign returns -1, 0 or +1 as d is negative, zero or positive.
func (d Decimal) Sign() int { return d.int().Sign() }

// IsZero reports whether d is zero at any scale.
func (d Decimal) IsZero() bool { return d.Sign() == 0 }

// String writes d in the contract's form, with exactly its scale's digits
// after the point and no exponent. Zero is never written "-0".
func (d Decimal) String() string {
	u := d.int()
	digits := new(big.Int).Abs(u).String()
	if d.scale > 0 {
		if pad := int(d.scale) - len(digits) + 1; pad > 0 {
			digits = strings.Repeat("0", pad) + digits
		}
		cut := len(digits) - int(d.scale)
		digits = digits[:cut] + "." + digits[cut:]
	}
	if u.Sign() < 0 {
		return "-" + digits
	}
	return digits
}

// truncate shortens outside input quoted in an error.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
