package plugins

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// compileTopology is a cluster with the core and the proxy at ClusterIPs.
func compileTopology() Topology {
	return Topology{
		CoreAddress:  "10.96.0.10:443",
		CorePodPort:  8443,
		ProxyAddress: "10.96.0.20:3128",
		ProxyPodPort: 3128,
	}
}

// compileEffective is effPlugin under effGrant, with the egress hosts given.
func compileEffective(t testing.TB, hosts ...string) EffectivePermissions {
	t.Helper()
	p, g := effPlugin(), effGrant()
	p.Manifest.Egress, g.Egress = hosts, hosts
	e, err := Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCompile(t *testing.T) {
	coreToken := ProjectedToken{Audience: AudienceCore, Path: CoreTokenPath, ExpirationSeconds: 3600, EnvVar: "OPENFIEF_TOKEN_FILE"}
	egressToken := ProjectedToken{Audience: AudienceEgress, Path: EgressTokenPath, ExpirationSeconds: 3600, EnvVar: "OPENFIEF_EGRESS_TOKEN_FILE"}
	secrets := []WorkloadSecret{
		{Slot: "ibkr-flex-credentials", SecretName: "ibkr-flex-credentials", MountPath: "/etc/openfief/ibkr", ReadOnly: true},
		{Slot: "ibkr-flex-query", SecretName: "ibkr-flex-query", MountPath: "/etc/openfief/query", ReadOnly: true},
	}
	// The defaults as the container gets them: 128Mi of memory plus the
	// 64Mi /tmp held in memory, 50m to 500m of CPU, 16Mi to 64Mi of disk.
	defaults := WorkloadResources{
		MemoryBytes: 192 << 20, CPURequestMilli: 50, CPULimitMilli: 500,
		EphemeralRequestBytes: 16 << 20, EphemeralLimitBytes: 64 << 20, TmpBytes: 64 << 20,
	}
	jwks := []ConfigMapMount{{Name: "openfief-sa-jwks", MountPath: "/var/run/secrets/openfief-sa-jwks", ReadOnly: true}}
	baseEnv := []EnvVar{
		{"OPENFIEF_CORE_ADDRESS", "10.96.0.10:443"},
		{"OPENFIEF_CORE_SUBJECT", "system:serviceaccount:openfief:openfief-core"},
		{"OPENFIEF_INSTANCE", "ibkr-main"},
		{"OPENFIEF_LISTEN_PORT", "8080"},
		{"OPENFIEF_SA_JWKS_DIR", "/var/run/secrets/openfief-sa-jwks"},
		{"OPENFIEF_TOKEN_FILE", "/var/run/secrets/openfief/token"},
	}

	tests := map[string]struct {
		effective EffectivePermissions
		topology  func(t *Topology)
		want      Workload
	}{
		"without egress: core token only, no proxy environment, no proxy rule": {
			effective: compileEffective(t),
			topology:  func(t *Topology) { t.ProxyAddress, t.ProxyPodPort = "", 0 },
			want: Workload{
				Name: "ibkr-main", Namespace: "openfief", ServiceAccountName: "plugin-ibkr-main",
				Tokens:     []ProjectedToken{coreToken},
				Secrets:    secrets,
				ConfigMaps: jwks,
				Env:        baseEnv,
				PluginPort: 8080,
				NetworkPolicy: NetworkPolicy{
					Ingress: []NetworkRule{{PeerCore, 8080}},
					Egress:  []NetworkRule{{PeerCore, 8443}},
				},
				Capabilities: []Capability{CapabilityConnector},
				DataTiers:    []string{"transactions"},
				Resources:    defaults,
			},
		},
		"with egress: egress token, proxy environment, proxy rule and allow-list": {
			effective: compileEffective(t, "ndcdyn.interactivebrokers.com", "gdcdyn.interactivebrokers.com:443"),
			want: Workload{
				Name: "ibkr-main", Namespace: "openfief", ServiceAccountName: "plugin-ibkr-main",
				Tokens:     []ProjectedToken{coreToken, egressToken},
				Secrets:    secrets,
				ConfigMaps: jwks,
				Env: []EnvVar{
					{"HTTPS_PROXY", "http://10.96.0.20:3128"},
					{"NO_PROXY", "10.96.0.10"},
					baseEnv[0], baseEnv[1],
					{"OPENFIEF_EGRESS_TOKEN_FILE", "/var/run/secrets/openfief-egress/token"},
					baseEnv[2], baseEnv[3], baseEnv[4], baseEnv[5],
				},
				PluginPort: 8080,
				NetworkPolicy: NetworkPolicy{
					Ingress: []NetworkRule{{PeerCore, 8080}},
					Egress:  []NetworkRule{{PeerCore, 8443}, {PeerEgressProxy, 3128}},
				},
				AllowList:    []string{"gdcdyn.interactivebrokers.com:443", "ndcdyn.interactivebrokers.com:443"},
				Capabilities: []Capability{CapabilityConnector},
				DataTiers:    []string{"transactions"},
				Resources:    defaults,
			},
		},
		"IPv6 ClusterIPs, own plugin port and core subject": {
			effective: compileEffective(t, "api.example.com"),
			topology: func(t *Topology) {
				t.CoreAddress, t.ProxyAddress = "[fd00::10]:443", "[fd00::20]:3128"
				t.PluginPort, t.CoreSubject = 9090, "system:serviceaccount:openfief:core-2"
			},
			want: Workload{
				Name: "ibkr-main", Namespace: "openfief", ServiceAccountName: "plugin-ibkr-main",
				Tokens:     []ProjectedToken{coreToken, egressToken},
				Secrets:    secrets,
				ConfigMaps: jwks,
				Env: []EnvVar{
					{"HTTPS_PROXY", "http://[fd00::20]:3128"},
					{"NO_PROXY", "fd00::10"},
					{"OPENFIEF_CORE_ADDRESS", "[fd00::10]:443"},
					{"OPENFIEF_CORE_SUBJECT", "system:serviceaccount:openfief:core-2"},
					{"OPENFIEF_EGRESS_TOKEN_FILE", "/var/run/secrets/openfief-egress/token"},
					{"OPENFIEF_INSTANCE", "ibkr-main"},
					{"OPENFIEF_LISTEN_PORT", "9090"},
					baseEnv[4], baseEnv[5],
				},
				PluginPort: 9090,
				NetworkPolicy: NetworkPolicy{
					Ingress: []NetworkRule{{PeerCore, 9090}},
					Egress:  []NetworkRule{{PeerCore, 8443}, {PeerEgressProxy, 3128}},
				},
				AllowList:    []string{"api.example.com:443"},
				Capabilities: []Capability{CapabilityConnector},
				DataTiers:    []string{"transactions"},
				Resources:    defaults,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			top := compileTopology()
			if tc.topology != nil {
				tc.topology(&top)
			}
			got, err := Compile(tc.effective, top)
			if err != nil {
				t.Fatal(err)
			}
			sameOrDiff(t, "workload", tc.want, got)
			tok, ok := got.EgressToken()
			if ok != tc.effective.HasEgress() || ok && tok != egressToken {
				t.Errorf("EgressToken() = %v, %v with egress %v", tok, ok, tc.effective.HasEgress())
			}
			checkNoDNS(t, got)
		})
	}
}

// checkNoDNS fails when any rule of w admits port 53 (D-32).
func checkNoDNS(t *testing.T, w Workload) {
	t.Helper()
	for _, r := range slices.Concat(w.NetworkPolicy.Ingress, w.NetworkPolicy.Egress) {
		if r.Port == 53 {
			t.Fatalf("rule %+v admits DNS", r)
		}
	}
}

// Two instances of one manifest, whose grants bind the Secret slot to
// different Secrets, mount different Secrets at the same path (OF-1).
func TestCompilePerInstanceSecrets(t *testing.T) {
	compile := func(instance, secret string) Workload {
		p, g := effPlugin(), effGrant()
		p.Name, g.Name = instance, instance
		g.Secrets = []SecretGrant{{Name: "ibkr-flex-credentials", SecretName: secret}, {Name: "ibkr-flex-query"}}
		e, err := Effective(p, g)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Compile(e, compileTopology())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	joint, ira := compile("ibkr-joint", "ibkr-joint-credentials"), compile("ibkr-ira", "ibkr-ira-credentials")
	sameOrDiff(t, "joint account's Secrets", []WorkloadSecret{
		{Slot: "ibkr-flex-credentials", SecretName: "ibkr-joint-credentials", MountPath: "/etc/openfief/ibkr", ReadOnly: true},
		{Slot: "ibkr-flex-query", SecretName: "ibkr-flex-query", MountPath: "/etc/openfief/query", ReadOnly: true},
	}, joint.Secrets)
	sameOrDiff(t, "IRA account's Secrets", []WorkloadSecret{
		{Slot: "ibkr-flex-credentials", SecretName: "ibkr-ira-credentials", MountPath: "/etc/openfief/ibkr", ReadOnly: true},
		{Slot: "ibkr-flex-query", SecretName: "ibkr-flex-query", MountPath: "/etc/openfief/query", ReadOnly: true},
	}, ira.Secrets)
	if joint.ServiceAccountName == ira.ServiceAccountName {
		t.Errorf("both instances run as %s", joint.ServiceAccountName)
	}
}

// The same request and grant, in any order, compile to the same Workload.
func TestCompileDeterministic(t *testing.T) {
	p, g := benchPluginGrant()
	e, err := Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Compile(e, compileTopology())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		p, g := benchPluginGrant()
		shuffle(rng, p.Manifest.Capabilities)
		shuffle(rng, p.Manifest.Egress)
		shuffle(rng, p.Manifest.Secrets)
		shuffle(rng, p.Manifest.DataTiers)
		shuffle(rng, g.Capabilities)
		shuffle(rng, g.Egress)
		shuffle(rng, g.Secrets)
		shuffle(rng, g.DataTiers)
		e, err := Effective(p, g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Compile(e, compileTopology())
		if err != nil {
			t.Fatal(err)
		}
		sameOrDiff(t, "workload of shuffle "+strconv.Itoa(i), want, got)
	}
}

func shuffle[T any](rng *rand.Rand, s []T) {
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
}

func TestCompileRefusesTopology(t *testing.T) {
	egress, none := compileEffective(t, "api.example.com"), compileEffective(t)
	tests := map[string]struct {
		effective EffectivePermissions
		topology  func(t *Topology)
		fields    []string
	}{
		"core by name":                 {none, func(t *Topology) { t.CoreAddress = "openfief-core:443" }, []string{"topology.coreAddress"}},
		"core without port":            {none, func(t *Topology) { t.CoreAddress = "10.96.0.10" }, []string{"topology.coreAddress"}},
		"core missing":                 {none, func(t *Topology) { t.CoreAddress = "" }, []string{"topology.coreAddress"}},
		"core unspecified":             {none, func(t *Topology) { t.CoreAddress = "0.0.0.0:443" }, []string{"topology.coreAddress"}},
		"core with zone":               {none, func(t *Topology) { t.CoreAddress = "[fe80::1%eth0]:443" }, []string{"topology.coreAddress"}},
		"core on port 0":               {none, func(t *Topology) { t.CoreAddress = "10.96.0.10:0" }, []string{"topology.coreAddress"}},
		"core on the DNS port":         {none, func(t *Topology) { t.CoreAddress = "10.96.0.10:53" }, []string{"topology.coreAddress"}},
		"core pod port missing":        {none, func(t *Topology) { t.CorePodPort = 0 }, []string{"topology.corePodPort"}},
		"core pod port DNS":            {none, func(t *Topology) { t.CorePodPort = 53 }, []string{"topology.corePodPort"}},
		"core pod port too high":       {none, func(t *Topology) { t.CorePodPort = 65536 }, []string{"topology.corePodPort"}},
		"plugin port DNS":              {none, func(t *Topology) { t.PluginPort = 53 }, []string{"topology.pluginPort"}},
		"plugin port negative":         {none, func(t *Topology) { t.PluginPort = -1 }, []string{"topology.pluginPort"}},
		"proxy missing with egress":    {egress, func(t *Topology) { t.ProxyAddress, t.ProxyPodPort = "", 0 }, []string{"topology.proxyAddress", "topology.proxyPodPort"}},
		"proxy by name":                {egress, func(t *Topology) { t.ProxyAddress = "egress-proxy:3128" }, []string{"topology.proxyAddress"}},
		"proxy pod port DNS":           {egress, func(t *Topology) { t.ProxyPodPort = 53 }, []string{"topology.proxyPodPort"}},
		"bad proxy set without egress": {none, func(t *Topology) { t.ProxyAddress = "proxy" }, []string{"topology.proxyAddress"}},
		"core subject with a newline":  {none, func(t *Topology) { t.CoreSubject = "a\nb" }, []string{"topology.coreSubject"}},
		"every problem at once": {egress, func(t *Topology) { *t = Topology{PluginPort: 53} },
			[]string{"topology.coreAddress", "topology.corePodPort", "topology.pluginPort", "topology.proxyAddress", "topology.proxyPodPort"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			top := compileTopology()
			tc.topology(&top)
			w, err := Compile(tc.effective, top)
			if err == nil {
				t.Fatalf("Compile accepted %+v: %+v", top, w)
			}
			var fields []string
			for _, p := range problemsOf(t, err) {
				if !errors.Is(p.err, ErrInvalidTopology) {
					t.Errorf("%s: %v does not wrap ErrInvalidTopology", p.field, p.err)
				}
				fields = append(fields, p.field)
			}
			sameOrDiff(t, "fields", tc.fields, fields)
		})
	}
}

func TestCompileRefusesZeroPermissions(t *testing.T) {
	if _, err := Compile(EffectivePermissions{}, compileTopology()); !errors.Is(err, ErrNoCapabilityGranted) {
		t.Errorf("Compile(zero) = %v, want ErrNoCapabilityGranted", err)
	}
}

// No topology Compile accepts yields a rule for the DNS port (D-32).
func TestCompileNeverAllowsDNS(t *testing.T) {
	ports := []int{0, 1, 52, 53, 54, 443, 8080, 65535}
	for _, e := range []EffectivePermissions{compileEffective(t), compileEffective(t, "api.example.com")} {
		for _, core := range ports {
			for _, proxy := range ports {
				for _, plugin := range ports {
					top := Topology{
						CoreAddress: "10.0.0.1:" + strconv.Itoa(core), CorePodPort: core,
						ProxyAddress: "10.0.0.2:" + strconv.Itoa(proxy), ProxyPodPort: proxy, PluginPort: plugin,
					}
					w, err := Compile(e, top)
					if err != nil {
						continue
					}
					checkNoDNS(t, w)
				}
			}
		}
	}
}

func TestProjectedTokenPaths(t *testing.T) {
	tests := map[string]struct {
		token     ProjectedToken
		dir, file string
	}{
		"core":   {ProjectedToken{Path: CoreTokenPath}, "/var/run/secrets/openfief", "token"},
		"egress": {ProjectedToken{Path: EgressTokenPath}, "/var/run/secrets/openfief-egress", "token"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.token.Dir() != tc.dir || tc.token.File() != tc.file {
				t.Errorf("Dir, File = %q, %q; want %q, %q", tc.token.Dir(), tc.token.File(), tc.dir, tc.file)
			}
		})
	}
}

// FuzzEffectiveCompile feeds arbitrary request and grant entries and topology
// addresses through Effective and Compile: neither may panic, what is granted
// never exceeds request or grant (nor the manifest's owner egress slots), and
// no rule ever admits DNS.
func FuzzEffectiveCompile(f *testing.F) {
	f.Add("connector", "api.example.com", "creds", "/etc/creds", "other-creds", "tier", "10.96.0.10:443", 8443, "10.96.0.20:3128", 3128, "cloud.example.com", 1)
	f.Add("view", "*.x", "Bad", "/var/run/secrets/x", "", "bad tier", "core:443", 53, "[fe80::1%eth0]:1", 0, "API.example.com:443", -1)
	f.Add("view", "nas.example.org", "s", "/etc/s", "", "t", "10.96.0.10:443", 8443, "10.96.0.20:3128", 3128, "nas.example.org:8443", 0)
	f.Fuzz(func(t *testing.T, capability, host, slot, mount, bound, tier, core string, corePort int, proxy string, proxyPort int, ownerHost string, slots int) {
		p := Plugin{Name: "fuzz", Manifest: Manifest{
			Capabilities: []Capability{Capability(capability), CapabilityConnector},
			Egress:       []string{host, "api.example.com"},
			OwnerEgress:  slots,
			Secrets:      []SecretMount{{Name: slot, MountPath: mount}},
			DataTiers:    []string{tier},
		}}
		g := Grant{
			Name:         "fuzz",
			Capabilities: []Capability{Capability(capability)},
			Egress:       []string{host},
			OwnerEgress:  []string{ownerHost, "nas.example.org"},
			Secrets:      []SecretGrant{{Name: slot, SecretName: bound}},
			DataTiers:    []string{tier},
		}
		_ = NeedsApproval(p.Manifest, &g).String()
		e, err := Effective(p, g)
		if err != nil {
			return
		}
		if msg := exceeds(e, p.Manifest, g); msg != "" {
			t.Fatalf("effective exceeds request or grant: %s", msg)
		}
		w, err := Compile(e, Topology{CoreAddress: core, CorePodPort: corePort, ProxyAddress: proxy, ProxyPodPort: proxyPort})
		if err != nil {
			return
		}
		checkNoDNS(t, w)
		sameOrDiff(t, "allow-list", e.Egress(), w.AllowList)
	})
}

func TestCompileImagePullSecrets(t *testing.T) {
	tests := map[string]struct {
		granted []string
		want    []string
	}{
		"none":                         {granted: nil, want: nil},
		"one":                          {granted: []string{"regcred"}, want: []string{"regcred"}},
		"sorted":                       {granted: []string{"zz-pull", "ghcr.io-pull", "regcred"}, want: []string{"ghcr.io-pull", "regcred", "zz-pull"}},
		"repeat and invalid dropped":   {granted: []string{"regcred", "Bad_Name", "regcred"}, want: []string{"regcred"}},
		"per instance, from the grant": {granted: []string{"ibkr-joint-pull"}, want: []string{"ibkr-joint-pull"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, g := effPlugin(), effGrant()
			g.ImagePullSecrets = tc.granted
			e, err := Effective(p, g)
			if err != nil {
				t.Fatal(err)
			}
			sameOrDiff(t, "effective pull Secrets", tc.want, e.ImagePullSecrets())
			w, err := Compile(e, compileTopology())
			if err != nil {
				t.Fatal(err)
			}
			sameOrDiff(t, "workload pull Secrets", tc.want, w.ImagePullSecrets)
		})
	}
}

func TestEffectiveEqualPullSecrets(t *testing.T) {
	p, g := effPlugin(), effGrant()
	without, err := Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	g.ImagePullSecrets = []string{"regcred"}
	with, err := Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	if without.Equal(with) || with.Equal(without) {
		t.Error("permissions that differ only in pull Secrets compare equal")
	}
	g.ImagePullSecrets = []string{"regcred", "regcred"}
	again, err := Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	if !with.Equal(again) {
		t.Error("a repeated pull Secret changes the permissions")
	}
}
