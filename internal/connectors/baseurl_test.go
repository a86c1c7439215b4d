package connectors

import "testing"

func TestParseBaseURL(t *testing.T) {
	tests := map[string]string{ // input: the URL it reduces to, "" when refused
		"https://api.nbp.pl":           "https://api.nbp.pl",
		"https://api.nbp.pl/":          "https://api.nbp.pl",
		"https://nbp.test:8443":        "https://nbp.test:8443",
		"http://api.nbp.pl":            "",
		"api.nbp.pl":                   "",
		"https://":                     "",
		"https://:443":                 "",
		"https://user@api.nbp.pl":      "",
		"https://api.nbp.pl/api":       "",
		"https://api.nbp.pl/%2F":       "",
		"https://api.nbp.pl?x=1":       "",
		"https://api.nbp.pl?":          "",
		"https://api.nbp.pl#f":         "",
		"https://api.nbp.pl:bad\x7f/x": "",
	}
	for in, want := range tests {
		u, err := ParseBaseURL(in)
		got := ""
		if err == nil {
			got = u.String()
		}
		if got != want {
			t.Errorf("ParseBaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
