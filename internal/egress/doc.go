// Package egress is the OpenFief egress proxy: the one door from plugin pods to
// the internet (D-32). Plugins have no DNS and their NetworkPolicy lets them
// reach only the core and this proxy, so every outbound connection is an HTTP
// CONNECT tunnel opened here.
//
// A tunnel opens only when all of these hold, checked in this order:
//
//   - the request is a CONNECT (anything else, plain-HTTP proxying included,
//     gets 405);
//   - Proxy-Authorization carries Basic credentials with user "plugin" and the
//     plugin's openfief-egress token as password (D-63), and a TokenReviewer
//     accepts the token for a ServiceAccount that is a plugin's identity
//     (407 otherwise; 403 for a valid identity that is not a plugin);
//   - the CONNECT target, canonicalised with plugins.CanonicalEgressHost, is
//     exactly an entry of that plugin's allow-list from the AllowListSource
//     (403 otherwise);
//   - the plugin and the proxy are under their caps on open tunnels (429 and
//     503);
//   - the proxy's own resolution of the name yields only addresses outside
//     loopback, private, link-local, CGNAT, multicast and the other special
//     ranges (403 otherwise); the proxy then dials exactly those checked
//     addresses, so a second lookup (DNS rebinding) cannot change them.
//
// Open tunnels close when idle, when the proxy shuts down, and when their host
// leaves the plugin's allow-list. Every tunnel and every refusal gets one
// access-log line; no token or Proxy-Authorization header is ever logged.
package egress
