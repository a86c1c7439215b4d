package plugins

import (
	"errors"
	"strings"
	"testing"
)

// TestParseSecretBinding checks the owner's SLOT[=SECRET] syntax (OF-1).
func TestParseSecretBinding(t *testing.T) {
	cases := map[string]struct {
		in   string
		want SecretGrant
		err  error
	}{
		"a slot":                         {in: "creds", want: SecretGrant{Name: "creds"}},
		"a slot bound to a Secret":       {in: "creds=account-2", want: SecretGrant{Name: "creds", SecretName: "account-2"}},
		"a slot bound to its own name":   {in: "creds=creds", want: SecretGrant{Name: "creds"}},
		"dotted names":                   {in: "a.b=c.d", want: SecretGrant{Name: "a.b", SecretName: "c.d"}},
		"empty":                          {in: "", err: ErrRequired},
		"an empty slot":                  {in: "=account-2", err: ErrRequired},
		"an empty Secret":                {in: "creds=", err: ErrRequired},
		"an invalid slot":                {in: "Creds", err: ErrInvalidSecretName},
		"an invalid Secret":              {in: "creds=Not_A_Name", err: ErrInvalidSecretName},
		"two equals signs":               {in: "creds=a=b", err: ErrInvalidSecretName},
		"a space":                        {in: "creds= a", err: ErrInvalidSecretName},
		"a Secret name that is too long": {in: "creds=" + strings.Repeat("a", 254), err: ErrInvalidSecretName},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseSecretBinding("selection.secrets[0]", tc.in)
			if tc.err != nil {
				var fe *FieldError
				if !errors.Is(err, tc.err) || !errors.As(err, &fe) || fe.Field != "selection.secrets[0]" {
					t.Fatalf("parseSecretBinding(%q) = %v, want a *FieldError wrapping %v", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseSecretBinding(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("parseSecretBinding(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestSecretGrantSecret checks a granted slot mounts its bound Secret, or
// the one named like it.
func TestSecretGrantSecret(t *testing.T) {
	cases := map[string]struct {
		in   SecretGrant
		want string
	}{
		"unbound": {in: SecretGrant{Name: "creds"}, want: "creds"},
		"bound":   {in: SecretGrant{Name: "creds", SecretName: "account-2"}, want: "account-2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.Secret(); got != tc.want {
				t.Errorf("Secret() = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzParseSecretBinding proves the SLOT[=SECRET] parser never panics, that
// what it accepts is a valid grant entry that prints back to what it reads,
// and that every refusal is a *FieldError with a known sentinel.
func FuzzParseSecretBinding(f *testing.F) {
	for _, seed := range []string{"creds", "creds=account-2", "creds=creds", "=", "creds=", "=x", "a=b=c", "A", "a.b=c.d", "\xff=a", strings.Repeat("a", 254)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := parseSecretBinding("f", s)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "f" || !(errors.Is(err, ErrRequired) || errors.Is(err, ErrInvalidSecretName)) {
				t.Fatalf("parseSecretBinding(%q) = %v, not a *FieldError with a known sentinel", s, err)
			}
			return
		}
		if err := (Grant{Name: "fx", Secrets: []SecretGrant{g}}).Validate(); err != nil {
			t.Fatalf("parseSecretBinding(%q) = %+v, which is not a valid grant entry: %v", s, g, err)
		}
		if g.SecretName == g.Name {
			t.Fatalf("parseSecretBinding(%q) recorded the slot's own name as a binding", s)
		}
		back := g.Name
		if g.SecretName != "" {
			back += "=" + g.SecretName
		}
		if again, err := parseSecretBinding("f", back); err != nil || again != g {
			t.Fatalf("parseSecretBinding(%q) = %+v, but its printed form %q reads as %+v, %v", s, g, back, again, err)
		}
	})
}
