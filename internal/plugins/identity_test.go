package plugins

import (
	"strings"
	"testing"
)

func TestServiceAccountName(t *testing.T) {
	if got := ServiceAccountName("ibkr-main"); got != "plugin-ibkr-main" {
		t.Errorf("ServiceAccountName = %q", got)
	}
	if got := ServiceAccountUsername("ibkr-main"); got != "system:serviceaccount:openfief:plugin-ibkr-main" {
		t.Errorf("ServiceAccountUsername = %q", got)
	}
}

// TestPluginForServiceAccount checks the reverse map takes only a plugin's
// own ServiceAccount in openfief for a plugin (D-63).
func TestPluginForServiceAccount(t *testing.T) {
	longest := strings.Repeat("a", MaxNameLength)
	tests := map[string]struct {
		username string
		want     string // "" when refused
	}{
		"a plugin":                        {username: "system:serviceaccount:openfief:plugin-nbp-fx", want: "nbp-fx"},
		"the longest name":                {username: "system:serviceaccount:openfief:plugin-" + longest, want: longest},
		"a name one too long":             {username: "system:serviceaccount:openfief:plugin-" + longest + "a"},
		"another namespace":               {username: "system:serviceaccount:default:plugin-nbp-fx"},
		"a namespace with a prefix trick": {username: "system:serviceaccount:openfief-x:plugin-nbp-fx"},
		"a namespace that ends like it":   {username: "system:serviceaccount:xopenfief:plugin-nbp-fx"},
		"the core's ServiceAccount":       {username: "system:serviceaccount:openfief:openfief-core"},
		"the operator's ServiceAccount":   {username: "system:serviceaccount:openfief:openfief-operator"},
		"no plugin name":                  {username: "system:serviceaccount:openfief:plugin-"},
		"plugin- twice":                   {username: "system:serviceaccount:openfief:plugin-plugin-x", want: "plugin-x"},
		"name in upper case":              {username: "system:serviceaccount:openfief:plugin-NBP"},
		"name starting with a digit":      {username: "system:serviceaccount:openfief:plugin-1bank"},
		"name ending in a hyphen":         {username: "system:serviceaccount:openfief:plugin-bank-"},
		"name with a colon":               {username: "system:serviceaccount:openfief:plugin-bank:x"},
		"name with a dot":                 {username: "system:serviceaccount:openfief:plugin-bank.x"},
		"a user":                          {username: "plugin-nbp-fx"},
		"a node":                          {username: "system:node:plugin-nbp-fx"},
		"a group":                         {username: "system:serviceaccounts:openfief"},
		"upper-case prefix":               {username: "SYSTEM:serviceaccount:openfief:plugin-nbp-fx"},
		"leading space":                   {username: " system:serviceaccount:openfief:plugin-nbp-fx"},
		"trailing newline":                {username: "system:serviceaccount:openfief:plugin-nbp-fx\n"},
		"empty":                           {username: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := PluginForServiceAccount(tc.username)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("PluginForServiceAccount(%q) = %q, %v; want %q, %v", tc.username, got, ok, tc.want, tc.want != "")
			}
			if ok && ServiceAccountUsername(got) != tc.username {
				t.Errorf("ServiceAccountUsername(%q) = %q, want %q back", got, ServiceAccountUsername(got), tc.username)
			}
		})
	}
}
