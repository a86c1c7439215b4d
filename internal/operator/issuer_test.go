package operator

import (
	"errors"
	"testing"
)

// TestCheckIssuer: the API server's issuer follows the domain's OIDC issuer
// rule (plugins.CheckIssuer, tested there); a refusal is ErrInvalidIssuer.
func TestCheckIssuer(t *testing.T) {
	tests := map[string]bool{
		"https://kubernetes.default.svc":               true,
		"https://kubernetes.default.svc.cluster.local": true,
		"https://oidc.example.com/id/ABC":              true,
		"":                                             false,
		"http://kubernetes.default.svc":                false,
		"https://k8s?x=1":                              false,
		"https://user@k8s":                             false,
	}
	for issuer, ok := range tests {
		err := checkIssuer(issuer)
		if (err == nil) != ok || err != nil && !errors.Is(err, ErrInvalidIssuer) {
			t.Errorf("checkIssuer(%q) = %v, want ok=%v", issuer, err, ok)
		}
	}
}
