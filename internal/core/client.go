package core

import "k8s.io/client-go/rest"

// Defaults of Options.KubeAPIQPS and Options.KubeAPIBurst: the core's client
// of the API server mints a token for every connector it calls at least
// once per interval (and every eight minutes for intervals shorter than
// the tokens' ten-minute lifetime), so its rate limit bounds how many
// instances it can call on time. 200 per second holds 10,000 instances
// synced every minute (167 mints a second while a restarted core mints a
// token for each), with room for the TokenReviews of the plugins' calls.
// The API server's own priority and fairness still applies.
const (
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 400
)

// coreClientConfig is cfg with the core's client rate limit: qps and burst,
// the defaults where zero.
func coreClientConfig(cfg *rest.Config, qps float32, burst int) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if qps == 0 {
		qps = DefaultKubeAPIQPS
	}
	if burst == 0 {
		burst = DefaultKubeAPIBurst
	}
	cfg.QPS, cfg.Burst = qps, burst
	return cfg
}
