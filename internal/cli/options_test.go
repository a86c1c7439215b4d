package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// pinned is an image reference pinned by digest, which every command that
// takes --image accepts.
const pinned = "ghcr.io/example/nbp-fx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestValidate checks each command's Validate on its own, without a
// cluster: it refuses with the command's exit code and an error that names
// the flag (or argument) and the rule, and accepts what the command runs
// with.
func TestValidate(t *testing.T) {
	env := NewEnv(Streams{})
	other := NewEnv(Streams{})
	other.Namespace = "elsewhere"
	check := func(env *Env, edit func(*checkOptions)) *checkOptions {
		o := &checkOptions{env: env, timeout: defaultCheckTimeout, iso: isolationOptions{outside: defaultOutsideAddress, settle: defaultSettle}}
		edit(o)
		return o
	}
	apply := func(edit func(*platformApplyOptions)) *platformApplyOptions {
		o := &platformApplyOptions{env: env, overlay: "release", timeout: defaultPlatformTimeout}
		edit(o)
		return o
	}
	for name, tc := range map[string]struct {
		o    commandOptions
		args []string
		// code is the exit code of the refusal, ExitOK when accepted.
		code int
		want []string
	}{
		"install: an image":           {&installOptions{env: env, image: pinned}, []string{"fx"}, ExitOK, nil},
		"install: a catalog entry":    {&installOptions{env: env, catalogEntry: "nbp-fx"}, []string{"fx"}, ExitOK, nil},
		"install: an invalid NAME":    {&installOptions{env: env, image: pinned}, []string{"Fx_1"}, ExitInvalid, []string{"NAME: "}},
		"install: neither source":     {&installOptions{env: env}, []string{"fx"}, ExitUsage, []string{"exactly one of --image IMAGE and --catalog ENTRY"}},
		"install: both sources":       {&installOptions{env: env, image: pinned, catalogEntry: "nbp-fx"}, []string{"fx"}, ExitUsage, []string{"exactly one of --image IMAGE and --catalog ENTRY"}},
		"install: an image by tag":    {&installOptions{env: env, image: "ghcr.io/example/nbp-fx:latest"}, []string{"fx"}, ExitInvalidImage, []string{"--image: "}},
		"upgrade: an image":           {&upgradeOptions{env: env, image: pinned}, []string{"fx"}, ExitOK, nil},
		"upgrade: an image by tag":    {&upgradeOptions{env: env, image: "ghcr.io/example/nbp-fx:latest"}, []string{"fx"}, ExitInvalidImage, []string{"--image: "}},
		"rollback: the previous":      {&rollbackOptions{env: env}, []string{"fx"}, ExitOK, nil},
		"rollback: --to 3":            {&rollbackOptions{env: env, toText: "3"}, []string{"fx"}, ExitOK, nil},
		"rollback: --to 0":            {&rollbackOptions{env: env, toText: "0"}, []string{"fx"}, ExitUsage, []string{`--to "0"`, "1 or more", "openfief plugin history fx"}},
		"rollback: --to a name":       {&rollbackOptions{env: env, toText: "v1"}, []string{"fx"}, ExitUsage, []string{`--to "v1"`, "want a revision number"}},
		"history: a table":            {&historyOptions{env: env}, []string{"fx"}, ExitOK, nil},
		"history: -o wide":            {&historyOptions{env: env, output: "wide"}, []string{"fx"}, ExitUsage, []string{`-o "wide"`}},
		"approve: everything":         {&approveOptions{env: env}, []string{"fx"}, ExitOK, nil},
		"approve: --all, --secret":    {&approveOptions{env: env, sel: plugins.Selection{All: true, Secrets: []string{"s=t"}}}, []string{"fx"}, ExitOK, nil},
		"approve: --all, --host":      {&approveOptions{env: env, sel: plugins.Selection{All: true, Egress: []string{"api.nbp.pl"}}}, []string{"fx"}, ExitUsage, []string{"--all", "only with --secret or --pull-secret"}},
		"approve: --all, --cap":       {&approveOptions{env: env, sel: plugins.Selection{All: true}, caps: []string{"view"}}, []string{"fx"}, ExitUsage, []string{"--all"}},
		"approve: --all, --tier":      {&approveOptions{env: env, sel: plugins.Selection{All: true, DataTiers: []string{"prices"}}}, []string{"fx"}, ExitUsage, []string{"--all"}},
		"approve: --all, --resource":  {&approveOptions{env: env, sel: plugins.Selection{All: true, Resources: true}}, []string{"fx"}, ExitUsage, []string{"--all"}},
		"uninstall: any flags":        {&uninstallOptions{env: env, purge: true, purgeData: true, yes: true}, []string{"fx"}, ExitOK, nil},
		"import: a name":              {&importOptions{env: env}, []string{"ibkr-main", "statement.xml"}, ExitOK, nil},
		"import: an invalid name":     {&importOptions{env: env}, []string{"Ibkr Main", "statement.xml"}, ExitInvalid, []string{"plugin name: "}},
		"status: a table":             {&attentionOptions{env: env}, nil, ExitOK, nil},
		"status: -o json":             {&attentionOptions{env: env, output: "json"}, nil, ExitOK, nil},
		"status: -o wide":             {&attentionOptions{env: env, output: "wide"}, nil, ExitUsage, []string{`-o "wide"`}},
		"version: --client -o yaml":   {&versionOptions{env: env, output: "yaml", clientOnly: true}, nil, ExitOK, nil},
		"version: -o table":           {&versionOptions{env: env, output: "table"}, nil, ExitUsage, []string{`-o "table"`}},
		"dashboard: any free port":    {&dashboardOptions{env: env}, nil, ExitOK, nil},
		"dashboard: port too high":    {&dashboardOptions{env: env, port: 65536}, nil, ExitUsage, []string{"--port 65536", "0 (any free port) to 65535"}},
		"dashboard: negative port":    {&dashboardOptions{env: env, port: -1}, nil, ExitUsage, []string{"--port -1"}},
		"check: the defaults":         {check(env, func(*checkOptions) {}), nil, ExitOK, nil},
		"check: json":                 {check(env, func(o *checkOptions) { o.output = "json" }), nil, ExitOK, nil},
		"check: isolation":            {check(env, func(o *checkOptions) { o.isolation = true }), nil, ExitOK, nil},
		"check: -o yaml":              {check(env, func(o *checkOptions) { o.output = "yaml" }), nil, ExitUsage, []string{`-o "yaml"`, "only json"}},
		"check: zero timeout":         {check(env, func(o *checkOptions) { o.timeout = 0 }), nil, ExitUsage, []string{"--timeout must be positive"}},
		"check: --pre --isolation":    {check(env, func(o *checkOptions) { o.pre, o.isolation = true, true }), nil, ExitUsage, []string{"--isolation", "--pre"}},
		"check: isolation elsewhere":  {check(other, func(o *checkOptions) { o.isolation = true }), nil, ExitUsage, []string{"--isolation", "not elsewhere"}},
		"check: negative settle":      {check(env, func(o *checkOptions) { o.iso.settle = -time.Second }), nil, ExitUsage, []string{"--settle must not be negative"}},
		"check: outside, no port":     {check(env, func(o *checkOptions) { o.iso.outside = "1.1.1.1" }), nil, ExitUsage, []string{`--outside-address "1.1.1.1"`, "want host:port"}},
		"platform: the defaults":      {apply(func(*platformApplyOptions) {}), nil, ExitOK, nil},
		"platform: api server cidrs":  {apply(func(o *platformApplyOptions) { o.apiServerCIDRs = []string{"10.0.0.2/32", "fd00::7"} }), nil, ExitOK, nil},
		"platform: zero timeout":      {apply(func(o *platformApplyOptions) { o.timeout = 0 }), nil, ExitUsage, []string{"--timeout must be positive"}},
		"platform: negative timeout":  {apply(func(o *platformApplyOptions) { o.upgrade, o.timeout = true, -time.Minute }), nil, ExitUsage, []string{"--timeout must be positive"}},
		"platform: not a cidr":        {apply(func(o *platformApplyOptions) { o.apiServerCIDRs = []string{"kubernetes"} }), nil, ExitUsage, []string{"--api-server-cidr: "}},
		"uninstall platform":          {&platformUninstallOptions{env: env, timeout: defaultPlatformTimeout}, nil, ExitOK, nil},
		"uninstall platform, no time": {&platformUninstallOptions{env: env}, nil, ExitUsage, []string{"--timeout must be positive"}},
		"platform status":             {&platformStatusOptions{env: env}, nil, ExitOK, nil},
		"list: a table":               {&listOptions{env: env}, nil, ExitOK, nil},
		"list: yaml":                  {&listOptions{env: env, output: "yaml"}, nil, ExitOK, nil},
		"list: -o wide":               {&listOptions{env: env, output: "wide"}, nil, ExitUsage, []string{`-o "wide"`, "want json or yaml"}},
		"status: json":                {&statusOptions{env: env, output: "json"}, []string{"fx"}, ExitOK, nil},
		"status: -o name":             {&statusOptions{env: env, output: "name"}, []string{"fx"}, ExitUsage, []string{`-o "name"`}},
		"catalog list: json":          {&catalogListOptions{env: env, output: "json"}, nil, ExitOK, nil},
		"catalog list: yaml":          {&catalogListOptions{env: env, output: "yaml"}, nil, ExitUsage, []string{`--output "yaml"`, "want json"}},
		"revoke":                      {&revokeOptions{env: env}, []string{"fx"}, ExitOK, nil},
		"purge-data: list":            {&purgeDataOptions{env: env}, nil, ExitOK, nil},
		"purge-data: a key":           {&purgeDataOptions{env: env}, []string{"nbp-fx~0a1b2c3d"}, ExitOK, nil},
		"purge-data: an empty KEY":    {&purgeDataOptions{env: env}, []string{""}, ExitUsage, []string{`KEY ""`}},
		"purge-data: a bad KEY":       {&purgeDataOptions{env: env}, []string{"NBP FX"}, ExitUsage, []string{"KEY ", "only lower-case letters"}},
		"verify: an image":            {&verifyOptions{env: env}, []string{pinned}, ExitOK, nil},
		"verify: an image by tag":     {&verifyOptions{env: env}, []string{"ghcr.io/example/nbp-fx:latest"}, ExitInvalidImage, []string{"IMAGE: "}},
		"test: an image":              {&pluginTestOptions{env: env, output: "text", timeout: time.Minute}, []string{pinned}, ExitOK, nil},
		"test: an image by tag":       {&pluginTestOptions{env: env, output: "text", timeout: time.Minute}, []string{"ghcr.io/example/nbp-fx:latest"}, ExitInvalidImage, []string{"IMAGE: "}},
		"test: -o yaml":               {&pluginTestOptions{env: env, output: "yaml", timeout: time.Minute}, []string{pinned}, ExitUsage, []string{"-o", "text or json"}},
		"test: no --timeout":          {&pluginTestOptions{env: env, output: "json"}, []string{pinned}, ExitUsage, []string{"--timeout"}},
		"test: --key and --signers":   {&pluginTestOptions{env: env, output: "text", timeout: time.Minute, key: "k.pem", trust: trustFlags{signersFile: "s.json"}}, []string{pinned}, ExitUsage, []string{"--key", "--signers"}},
		"wait: a reason":              {&waitOptions{env: env, reason: "Running", timeout: time.Minute}, []string{"fx"}, ExitOK, nil},
		"wait: no --for":              {&waitOptions{env: env, timeout: time.Minute}, []string{"fx"}, ExitUsage, []string{"--for is required"}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.o.Complete(tc.args); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			err := tc.o.Validate()
			if code := ExitCode(err); code != tc.code {
				t.Fatalf("exit code %d, want %d (error: %v)", code, tc.code, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not hold %q", err, w)
				}
			}
		})
	}
}

// TestValidateKeepsWhatItParsed checks the values Validate hands to Run:
// the --image reference and the normalised --api-server-cidr addresses.
func TestValidateKeepsWhatItParsed(t *testing.T) {
	env := NewEnv(Streams{})
	in := &installOptions{env: env, image: pinned, name: "fx"}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := in.ref.String(); got != pinned {
		t.Errorf("install ref %q, want %q", got, pinned)
	}
	up := &upgradeOptions{env: env, image: pinned, name: "fx"}
	if err := up.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := up.ref.String(); got != pinned {
		t.Errorf("upgrade ref %q, want %q", got, pinned)
	}
	ap := &platformApplyOptions{env: env, timeout: time.Minute, apiServerCIDRs: []string{"10.9.8.7", "fd00::7"}}
	if err := ap.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(ap.cidrs, ","), "10.9.8.7/32,fd00::7/128"; got != want {
		t.Errorf("cidrs %q, want %q", got, want)
	}
}

// TestApproveCompleteAddsCapabilities checks --capability values join the
// selection that plugins.Approve reads.
func TestApproveCompleteAddsCapabilities(t *testing.T) {
	o := &approveOptions{env: NewEnv(Streams{}), caps: []string{"connector", "view"}}
	if err := o.Complete([]string{"fx"}); err != nil {
		t.Fatal(err)
	}
	want := []plugins.Capability{"connector", "view"}
	if o.name != "fx" || len(o.sel.Capabilities) != 2 || o.sel.Capabilities[0] != want[0] || o.sel.Capabilities[1] != want[1] {
		t.Errorf("name %q, capabilities %v; want fx, %v", o.name, o.sel.Capabilities, want)
	}
}
