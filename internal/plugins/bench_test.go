package plugins

import (
	"fmt"
	"testing"
)

// benchPluginGrant is a realistic connector: two capabilities, ten egress
// hosts and three Secret slots, all approved, one Secret bound per instance.
func benchPluginGrant() (Plugin, Grant) {
	var hosts []string
	for i := range 10 {
		hosts = append(hosts, fmt.Sprintf("api%d.bank.example.com", i))
	}
	p := Plugin{
		Name:  "bank-sync",
		Image: "ghcr.io/example/bank-sync@" + testDigest,
		Manifest: Manifest{
			Capabilities: []Capability{CapabilityConnector, CapabilityView},
			Egress:       hosts,
			Secrets: []SecretMount{
				{Name: "bank-credentials", MountPath: "/etc/bank/credentials"},
				{Name: "bank-client-cert", MountPath: "/etc/bank/tls"},
				{Name: "bank-webhook-key", MountPath: "/etc/bank/webhook"},
			},
			DataTiers: []string{"transactions", "holdings", "fx_rates"},
		},
	}
	g := Grant{
		Name:         "bank-sync",
		Capabilities: []Capability{CapabilityView, CapabilityConnector},
		Egress:       append([]string(nil), hosts...),
		Secrets: []SecretGrant{
			{Name: "bank-credentials", SecretName: "bank-sync-credentials"},
			{Name: "bank-client-cert"},
			{Name: "bank-webhook-key"},
		},
		DataTiers: []string{"fx_rates", "holdings", "transactions"},
	}
	return p, g
}

func BenchmarkEffectiveCompile(b *testing.B) {
	p, g := benchPluginGrant()
	top := compileTopology()
	b.ReportAllocs()
	for b.Loop() {
		e, err := Effective(p, g)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Compile(e, top); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlanRollout(b *testing.B) {
	p, g := benchPluginGrant()
	image, err := ParseImageRef(p.Image)
	if err != nil {
		b.Fatal(err)
	}
	current := &Version{Name: p.Name, Image: image, Manifest: p.Manifest}
	previous := &Version{Name: p.Name, Image: image, Manifest: p.Manifest}
	current.Manifest.Egress = append(current.Manifest.Egress[:10:10], "new.bank.example.com")
	in := RolloutInput{Current: current, CurrentDeployable: true, Previous: previous, Grant: &g}
	b.ReportAllocs()
	for b.Loop() {
		if plan := PlanRollout(in); plan.Outcome != RolloutPrevious {
			b.Fatalf("outcome %v", plan.Outcome)
		}
	}
}
