package devstack

import (
	"encoding/json"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// DemoImage is one image the local registry serves: an FX-rates connector
// in two versions, the second asking for one more host.
type DemoImage struct {
	Name       string
	Repository string
	EnvVar     string
	Manifest   plugins.Manifest
	Readme     string
}

// demoSchema is the demo connector's config schema.
const demoSchema = `{"type":"object","additionalProperties":false,"properties":{"currencies":{"type":"array","items":{"type":"string","pattern":"^[A-Z]{3}$"}}}}`

// DemoImages lists the demo images, in a fixed order.
func DemoImages() []DemoImage {
	m := func(hosts ...string) plugins.Manifest {
		return plugins.Manifest{
			Capabilities: []plugins.Capability{plugins.CapabilityConnector},
			Egress:       hosts,
			DataTiers:    []string{"fx_rates"},
			ConfigSchema: json.RawMessage(demoSchema),
		}
	}
	const readme = "OpenFief demo plugin image: a signed manifest label and no runnable binary; kwok plays its pods.\n"
	return []DemoImage{
		{Name: "demo-v1", Repository: "plugins/fx-rates", EnvVar: "OPENFIEF_DEMO_IMAGE_V1", Manifest: m("api.nbp.pl"), Readme: readme + "version 1\n"},
		{Name: "demo-v2", Repository: "plugins/fx-rates", EnvVar: "OPENFIEF_DEMO_IMAGE_V2", Manifest: m("api.nbp.pl", "static.nbp.pl"), Readme: readme + "version 2\n"},
	}
}
