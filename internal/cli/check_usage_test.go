package cli

import "testing"

// TestCheckIsolationUsage: flags that cannot go together or cannot be
// right are refused with exit 2 before anything is read or created.
func TestCheckIsolationUsage(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"with --pre":           {[]string{"check", "--pre", "--isolation"}, "cannot run with --pre"},
		"another namespace":    {[]string{"check", "--isolation", "-n", "elsewhere"}, "only in namespace openfief, not elsewhere"},
		"outside without port": {[]string{"check", "--isolation", "--outside-address", "1.1.1.1"}, `--outside-address "1.1.1.1": want host:port`},
		"negative settle":      {[]string{"check", "--isolation", "--settle", "-1s"}, "--settle must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			r := openfief(t, nil, runOpts{}, tc.args...)
			expect(t, r, ExitUsage, tc.want)
		})
	}
}
