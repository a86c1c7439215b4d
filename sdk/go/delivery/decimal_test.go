// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"errors"
	"math/big"
	"strings"
	"testing"
)

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"0":        "0",
		"-0":       "0",
		"-0.00":    "0.00",
		"12.50":    "12.50",
		"-12.5":    "-12.5",
		"007":      "7",
		"0.000001": "0.000001",
		"-0.1":     "-0.1",
		"123456789012345678901234567890.123456789": "123456789012345678901234567890.123456789",
		"":                                      "",
		"-":                                     "",
		"+1":                                    "",
		"1.":                                    "",
		".5":                                    "",
		"1e3":                                   "",
		"1,000.00":                              "",
		" 1":                                    "",
		"1 ":                                    "",
		"--1":                                   "",
		"1.2.3":                                 "",
		"NaN":                                   "",
		"Inf":                                   "",
		"٣":                                     "", // an Arabic-Indic digit
		"0x10":                                  "",
		"1_000":                                 "",
		strings.Repeat("9", maxDecimalDigits+1): "",
	} {
		t.Run(in, func(t *testing.T) {
			d, err := ParseDecimal(in)
			if want == "" {
				if err == nil {
					t.Fatalf("ParseDecimal(%q) = %s, want an error", in, d)
				}
				if !errors.Is(err, ErrNotDecimal) {
					t.Fatalf("error %v does not wrap ErrNotDecimal", err)
				}
				if IsDecimal(in) {
					t.Fatalf("IsDecimal(%q) = true", in)
				}
				return
			}
			if err != nil || d.String() != want {
				t.Fatalf("ParseDecimal(%q) = %s, %v; want %s", in, d, err, want)
			}
		})
	}
}

func TestParseNumber(t *testing.T) {
	for in, want := range map[string]string{
		"4.2843":   "4.2843",
		"+4.2843":  "4.2843",
		"-1":       "-1",
		"1E3":      "1000",
		"1.5e+2":   "150",
		"1.25e1":   "12.5",
		"1.5E-3":   "0.0015",
		"-2e-2":    "-0.02",
		"0e5":      "0",
		"12.30e0":  "12.30",
		"1e100":    "1" + strings.Repeat("0", 100),
		"1e101":    "",
		"1e":       "",
		"1e+":      "",
		"1e--1":    "",
		"1e+-1":    "",
		"+-1":      "",
		"++1":      "",
		"e5":       "",
		"1.e5":     "",
		"1e5.0":    "",
		"0.1f":     "",
		"":         "",
		"1e0001":   "",
		"Infinity": "",
	} {
		t.Run(in, func(t *testing.T) {
			d, err := ParseNumber(in)
			if want == "" {
				if err == nil {
					t.Fatalf("ParseNumber(%q) = %s, want an error", in, d)
				}
				return
			}
			if err != nil || d.String() != want {
				t.Fatalf("ParseNumber(%q) = %s, %v; want %s", in, d, err, want)
			}
		})
	}
}

// TestDecimalStaysExact is the "0.1 + 0.2" family: sums and products that
// binary floating point gets wrong come out exact.
func TestDecimalStaysExact(t *testing.T) {
	sum := MustDecimal("0.1").Add(MustDecimal("0.2"))
	if sum.String() != "0.3" || sum.Cmp(MustDecimal("0.3")) != 0 {
		t.Fatalf("0.1 + 0.2 = %s, want exactly 0.3", sum)
	}
	if f1, f2 := 0.1, 0.2; f1+f2 == 0.3 {
		t.Fatal("float64 0.1+0.2 == 0.3: the premise of this test is wrong")
	}
	var total Decimal
	for range 10 {
		total = total.Add(MustDecimal("0.1"))
	}
	if total.Cmp(MustDecimal("1")) != 0 {
		t.Fatalf("ten times 0.1 = %s, want 1", total)
	}
	for _, tt := range []struct{ a, b, op, want string }{
		{"1.10", "2.205", "+", "3.305"},
		{"1.10", "2.205", "-", "-1.105"},
		{"-0.30", "0.3", "+", "0.00"},
		{"8.5", "117.66", "*", "1000.110"},
		{"1000.10", "-1000.10", "+", "0.00"},
		{"4.2843", "1234.56", "*", "5289.225408"},
		{"0.000000000000000001", "1000000000000000000", "*", "1.000000000000000000"},
		{"9007199254740993", "1", "+", "9007199254740994"}, // past float64's exact integers
	} {
		a, b := MustDecimal(tt.a), MustDecimal(tt.b)
		var got Decimal
		switch tt.op {
		case "+":
			got = a.Add(b)
		case "-":
			got = a.Sub(b)
		case "*":
			got = a.Mul(b)
		}
		if got.String() != tt.want {
			t.Errorf("%s %s %s = %s, want %s", tt.a, tt.op, tt.b, got, tt.want)
		}
	}
}

func TestDecimalCompareAndSign(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"1.50", "1.5", 0},
		{"1.5", "1.49", 1},
		{"-1", "0", -1},
		{"0.000", "0", 0},
		{"-0.01", "-0.001", -1},
	} {
		if got := MustDecimal(tt.a).Cmp(MustDecimal(tt.b)); got != tt.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	var zero Decimal
	if !zero.IsZero() || zero.String() != "0" || zero.Neg().String() != "0" {
		t.Fatalf("zero value: %s", zero)
	}
	if MustDecimal("-2.5").Neg().String() != "2.5" || MustDecimal("-2.5").Sign() != -1 {
		t.Fatal("Neg or Sign wrong")
	}
}

func TestMustDecimalPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MustDecimal(\"1e3\") did not panic")
		}
	}()
	MustDecimal("1e3")
}

// FuzzParseDecimal checks the contract parser never panics, that what it
// accepts prints back unchanged (but for "-0"), and that it agrees with
// big.Rat on the value.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "-12.50", "1e3", "+1", "0.1", "-0", "00.10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecimal(s)
		if err != nil {
			return
		}
		if got := d.String(); got != s && "-"+got != s {
			// Leading zeros are dropped: compare by value.
			if d.Cmp(MustDecimal(got)) != 0 {
				t.Fatalf("ParseDecimal(%q).String() = %q", s, got)
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat refuses %q that ParseDecimal accepted", s)
		}
		back, ok := new(big.Rat).SetString(d.String())
		if !ok || back.Cmp(r) != 0 {
			t.Fatalf("value of %q changed to %s", s, d)
		}
	})
}

// FuzzParseNumber checks the lenient parser never panics and keeps the
// value big.Rat reads from the same text.
func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"4.2843", "+1e-3", "1E+2", "-0.5e1", "1e", "++1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseNumber(s)
		if err != nil {
			return
		}
		if !IsDecimal(d.String()) {
			t.Fatalf("ParseNumber(%q) printed %q, not a contract decimal", s, d)
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat refuses %q that ParseNumber accepted", s)
		}
		back, _ := new(big.Rat).SetString(d.String())
		if back.Cmp(r) != 0 {
			t.Fatalf("ParseNumber(%q) = %s, value changed", s, d)
		}
	})
}
