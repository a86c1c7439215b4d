package egress

import "net/http"

// Decisions and reasons of the access log and the decisions metric. A tunnel
// that opened is logged once more when it closes, with the close reason.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"

	// ReasonAllowed: the tunnel opened.
	ReasonAllowed = "allowed"
	// ReasonMethodNotAllowed: not a CONNECT (405).
	ReasonMethodNotAllowed = "method_not_allowed"
	// ReasonNoCredentials: no Proxy-Authorization (407).
	ReasonNoCredentials = "no_credentials"
	// ReasonBadCredentials: Proxy-Authorization not Basic plugin:<token> (407).
	ReasonBadCredentials = "bad_credentials"
	// ReasonUnauthenticated: the token review refused the token (407).
	ReasonUnauthenticated = "unauthenticated"
	// ReasonReviewFailed: the token could not be reviewed (503).
	ReasonReviewFailed = "review_failed"
	// ReasonNotAPlugin: the token is valid but not a plugin's identity (403).
	ReasonNotAPlugin = "not_a_plugin"
	// ReasonBadTarget: the CONNECT target is not host:port (400).
	ReasonBadTarget = "bad_target"
	// ReasonIPLiteral: the CONNECT target is an IP address (403).
	ReasonIPLiteral = "ip_literal"
	// ReasonInvalidTarget: the target is not a valid egress host (403).
	ReasonInvalidTarget = "invalid_target"
	// ReasonNotAllowed: the target is not on the plugin's allow-list (403).
	ReasonNotAllowed = "not_on_allowlist"
	// ReasonPluginLimit: the plugin has its maximum of open tunnels (429).
	ReasonPluginLimit = "plugin_tunnel_limit"
	// ReasonTunnelLimit: the proxy has its maximum of open tunnels (503).
	ReasonTunnelLimit = "tunnel_limit"
	// ReasonShuttingDown: the proxy is shutting down (503).
	ReasonShuttingDown = "shutting_down"
	// ReasonResolveFailed: the name did not resolve (502).
	ReasonResolveFailed = "resolve_failed"
	// ReasonBlockedAddress: the name resolved to a refused range (403).
	ReasonBlockedAddress = "blocked_address"
	// ReasonDialFailed: no resolved address could be reached (502).
	ReasonDialFailed = "dial_failed"
	// ReasonRevoked: the host left the plugin's allow-list (403 while
	// connecting; the close reason of an open tunnel).
	ReasonRevoked = "revoked"

	// Close reasons of a tunnel that opened.
	CloseEOF      = "closed"
	CloseIdle     = "idle_timeout"
	CloseRevoked  = ReasonRevoked
	CloseShutdown = "shutdown"
	CloseError    = "error"
)

// denial is a refused request: the status sent and the reason logged.
type denial struct {
	status int
	reason string
	detail string // for the log only; never a token
}

func deny(status int, reason string) *denial {
	return &denial{status: status, reason: reason}
}

func (d *denial) withDetail(s string) *denial {
	d.detail = s
	return d
}

// message is the response body: the status text and the reason, nothing a
// plugin could use to probe the cluster.
func (d *denial) message() string {
	return http.StatusText(d.status) + ": " + d.reason + "\n"
}
