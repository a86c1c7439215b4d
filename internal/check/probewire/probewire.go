// Package probewire is the exec protocol between `openfief check
// --isolation` and the check probe image (OF-29): the request the CLI passes
// as the argument of `/check-probe run`, and the one JSON document the probe
// prints. It holds only types and constants, so the CLI imports it without
// linking the probe (internal/checkprobe).
package probewire

import (
	"strconv"
	"strings"
)

// Binary is the probe's path in its image; Run is its sub-command:
// `/check-probe run REQUEST_JSON`.
const (
	Binary = "/check-probe"
	Run    = "run"
)

// Exit codes of `/check-probe run`.
const (
	// ExitOK: the request was valid and Response was printed, whatever the
	// observations.
	ExitOK = 0
	// ExitFailed: the probe could not run (serving: the port could not be
	// listened on; running: the response could not be written).
	ExitFailed = 1
	// ExitBadRequest: the request was refused; the reason is on stderr and
	// nothing is on stdout.
	ExitBadRequest = 2
)

// Bounds of a request.
const (
	// MaxCells is the most cells one request may hold.
	MaxCells = 32
	// DefaultTimeoutMillis bounds each cell when Request.TimeoutMillis is 0.
	DefaultTimeoutMillis = 2000
	// MaxTimeoutMillis is the largest Request.TimeoutMillis.
	MaxTimeoutMillis = 10000
	// MaxRequestBytes is the largest REQUEST_JSON.
	MaxRequestBytes = 64 << 10
	// MaxNameBytes is the longest Cell.Name (printable ASCII).
	MaxNameBytes = 63
	// MaxDetailBytes is the longest Result.Detail.
	MaxDetailBytes = 200
)

// DefaultDNSQuery is the name a DNS cell asks for when Cell.Query is empty:
// one only the cluster's DNS answers.
const DefaultDNSQuery = "kubernetes.default.svc.cluster.local."

// Kind is what a cell tries.
type Kind string

// The kinds of cell.
const (
	// KindTCP opens one TCP connection to Cell.Target.
	KindTCP Kind = "tcp"
	// KindDNSUDP sends one DNS query (type A, recursion desired) for
	// Cell.Query to Cell.Target over UDP.
	KindDNSUDP Kind = "dns-udp"
	// KindDNSTCP is KindDNSUDP over TCP.
	KindDNSTCP Kind = "dns-tcp"
	// KindProxyNoToken sends an HTTP CONNECT for Cell.Host to the egress
	// proxy named by HTTPS_PROXY without Proxy-Authorization.
	KindProxyNoToken Kind = "proxy-no-token"
	// KindProxyToken is KindProxyNoToken with the plugin's egress token as
	// Basic credentials (D-63).
	KindProxyToken Kind = "proxy-token"
)

// Request is REQUEST_JSON: the cells to try, each bounded by TimeoutMillis.
type Request struct {
	// TimeoutMillis bounds each cell; 0 means DefaultTimeoutMillis, at most
	// MaxTimeoutMillis.
	TimeoutMillis int `json:"timeoutMillis,omitempty"`
	// Cells are tried concurrently; 1 to MaxCells, names unique.
	Cells []Cell `json:"cells"`
}

// Cell is one connection to try. Which fields it needs depends on Kind:
// Target for tcp and dns-*, Query (optional) for dns-*, Host for proxy-*;
// the probe refuses a field the kind does not use.
type Cell struct {
	// Name identifies the cell's Result: printable ASCII, at most
	// MaxNameBytes.
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Target is the "ip:port" or "name:port" connected to.
	Target string `json:"target,omitempty"`
	// Host is the "name:port" a proxy cell asks the proxy to CONNECT to.
	Host string `json:"host,omitempty"`
	// Query is the name a DNS cell asks for; empty means DefaultDNSQuery.
	Query string `json:"query,omitempty"`
}

// Response is the one JSON document `/check-probe run` prints.
type Response struct {
	// Results are in the order of Request.Cells.
	Results []Result `json:"results"`
}

// Result is what one cell observed.
type Result struct {
	Name string `json:"name"`
	// Observed is one of the Observed constants, or StatusObserved(code)
	// for a proxy cell the proxy answered.
	Observed string `json:"observed"`
	// Detail is a short plain-ASCII reason (the error, the DNS rcode, the
	// proxy's status line); never a token.
	Detail string `json:"detail,omitempty"`
}

// What a cell observed.
const (
	// ObservedOpen: the TCP connection was established.
	ObservedOpen = "open"
	// ObservedRefused: the connection was refused actively (a reset, an
	// ICMP unreachable, no route).
	ObservedRefused = "refused"
	// ObservedTimeout: nothing answered within the timeout.
	ObservedTimeout = "timeout"
	// ObservedAnswered: a DNS server replied, whatever its rcode.
	ObservedAnswered = "answered"
	// ObservedError: the cell could not be tried as asked (no HTTPS_PROXY,
	// no token, a malformed reply); Detail says why.
	ObservedError = "error"
)

// statusPrefix starts the Observed of a proxy cell the proxy answered.
const statusPrefix = "status "

// StatusObserved is the Observed of a proxy cell whose proxy answered with
// HTTP status code: "status 407".
func StatusObserved(code int) string { return statusPrefix + strconv.Itoa(code) }

// ObservedStatus reads the status code out of a StatusObserved value.
func ObservedStatus(observed string) (int, bool) {
	s, ok := strings.CutPrefix(observed, statusPrefix)
	if !ok || len(s) != 3 {
		return 0, false
	}
	code, err := strconv.Atoi(s)
	if err != nil || code < 100 {
		return 0, false
	}
	return code, true
}

// The probe's config (OPENFIEF_CONFIG, EnvConfig), which `openfief check
// --isolation` sets on each probe Plugin: the cells the served probe tries
// from its first instruction, over and over for a window, so the check
// sees what a plugin reaches before its isolation is in force (OF-42's "at
// start" cells). `/check-probe at-start` prints what they observed.
const (
	// EnvConfig is the plugin's config variable, which the operator sets
	// from the Plugin's spec.config.
	EnvConfig = "OPENFIEF_CONFIG"
	// AtStart is the sub-command that prints AtStartResponse.
	AtStart = "at-start"
	// ExitPending: `at-start` was asked before the window ended, or the
	// probe has no at-start cells; nothing is on stdout.
	ExitPending = 3
	// MaxWindowMillis bounds AtStartConfig.WindowMillis.
	MaxWindowMillis = 10000
	// DefaultWindowMillis is the window when AtStartConfig.WindowMillis is 0.
	DefaultWindowMillis = 3000
	// MaxConfigBytes bounds the config the probe reads.
	MaxConfigBytes = 64 << 10
)

// Config is the probe's OPENFIEF_CONFIG.
type Config struct {
	// AtStart, when set, makes the served probe try its cells from its
	// first instruction.
	AtStart *AtStartConfig `json:"atStart,omitempty"`
}

// AtStartConfig is what the probe tries at start: tcp and dns cells only
// (no proxy cell: the probe must not send its token before it is asked
// to), each tried again and again, bounded by TimeoutMillis per attempt,
// until WindowMillis after the process started.
type AtStartConfig struct {
	WindowMillis  int    `json:"windowMillis,omitempty"`
	TimeoutMillis int    `json:"timeoutMillis,omitempty"`
	Cells         []Cell `json:"cells"`
}

// AtStartResponse is what `/check-probe at-start` prints: per cell, in
// config order, every attempt of the window.
type AtStartResponse struct {
	// WindowMillis is the window the cells were tried for.
	WindowMillis int             `json:"windowMillis"`
	Results      []AtStartResult `json:"results"`
}

// AtStartResult is what one cell observed during the window.
type AtStartResult struct {
	Name string `json:"name"`
	// Attempts is how many times it was tried; FirstMillis when the first
	// attempt began, in milliseconds after the probe's process started.
	Attempts    int   `json:"attempts"`
	FirstMillis int64 `json:"firstMillis"`
	// Reached is how many attempts were open or answered, and
	// FirstReachedMillis when the first of them began (-1: none).
	Reached            int   `json:"reached"`
	FirstReachedMillis int64 `json:"firstReachedMillis"`
	// Observed counts the attempts by what they observed (the Observed
	// constants).
	Observed map[string]int `json:"observed"`
	// Detail is the last reached attempt's detail, or the last one's.
	Detail string `json:"detail,omitempty"`
}
