// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"slices"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// BenchmarkVerify compares one JWKSVerifier.Verify (files stat'ed, key set
// cached) with a bare go-jose verification of the same token with the key in
// hand, the floor for any verifier. The two alternate within each iteration,
// so both see the same load on a shared machine; besides the ns/op of the
// pair it reports each one's mean µs/op and sdk/go-jose, the median over
// iterations of their ratio (the target: at most 1.2).
func BenchmarkVerify(b *testing.B) {
	for _, k := range []signingKey{rsaKey, ec256} {
		d := newJWKSDir(b, testIssuer, allKeys()...)
		v := d.verifier()
		tok := k.sign(b, validClaims())
		pub := k.priv.Public()
		// The steady state: files whose last change is old enough for
		// their stamp to stand for them.
		time.Sleep(stampSettle + 100*time.Millisecond)
		bare := func() error {
			parsed, err := jwt.ParseSigned(tok, allowedAlgorithms)
			if err != nil {
				return err
			}
			var c jwt.Claims
			if err := parsed.Claims(pub, &c); err != nil {
				return err
			}
			return c.ValidateWithLeeway(jwt.Expected{Issuer: testIssuer, Subject: testSubject, AnyAudience: jwt.Audience{InstanceAudience(testInstance)}}, Leeway)
		}
		b.Run(string(k.alg), func(b *testing.B) {
			var sdk, floor time.Duration
			var ratios []float64
			for b.Loop() {
				start := time.Now()
				if err := v.Verify(tok); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := bare(); err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				sdk += mid.Sub(start)
				floor += end.Sub(mid)
				ratios = append(ratios, float64(mid.Sub(start))/float64(end.Sub(mid)))
			}
			n := float64(len(ratios))
			slices.Sort(ratios)
			b.ReportMetric(float64(sdk)/1e3/n, "sdk-µs/op")
			b.ReportMetric(float64(floor)/1e3/n, "go-jose-µs/op")
			b.ReportMetric(ratios[len(ratios)/2], "sdk/go-jose")
		})
	}
}
