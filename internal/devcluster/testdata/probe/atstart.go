package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// The probe as an attacker from its first instruction: when its image holds
// attackPlanFile, main starts trying the plan's targets before anything
// else, over and over for the plan's window, and writes what each target
// did to attackResultFile (on the pod's /tmp), which `probe at-start`
// prints. A plugin's isolation must hold from that first attempt (OF-42).
const (
	attackPlanFile   = "/attack.json"
	attackResultFile = "/tmp/at-start.json"
)

// attackPlan is attackPlanFile.
type attackPlan struct {
	// WindowMillis is how long to keep trying after the process starts.
	WindowMillis int `json:"windowMillis"`
	// Targets are tried concurrently, each in a loop.
	Targets []attackTarget `json:"targets"`
}

// attackTarget is one thing to try: Kind tcp, dns-udp or dns-tcp; Addr is
// host:port, or "resolv.conf" (the pod's first nameserver, port 53) or
// "api-server" (KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT).
type attackTarget struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Addr string `json:"addr"`
}

// attackResult is what one target did during the window.
type attackResult struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Addr     string `json:"addr"`
	Attempts int    `json:"attempts"`
	// Open counts attempts that connected (tcp) or got any reply (dns).
	Open int `json:"open"`
	// FirstOpenMillis is when, after the process started, the first open
	// attempt began; -1 when none was open.
	FirstOpenMillis int64 `json:"firstOpenMillis"`
	// FirstMillis is when the first attempt began.
	FirstMillis int64 `json:"firstMillis"`
	// Outcomes counts each outcome ("open", "refused", "timeout", "error: ...").
	Outcomes map[string]int `json:"outcomes"`
}

// processStart is taken as early as a Go program can: package variables
// are initialised before any init function or main.
var processStart = time.Now()

// attackAtStart runs the plan in the image, if any, in the background.
func attackAtStart() {
	raw, err := os.ReadFile(attackPlanFile)
	if err != nil {
		return
	}
	var plan attackPlan
	if err := json.Unmarshal(raw, &plan); err != nil {
		writeAttack([]byte(`{"error":"bad plan"}`))
		return
	}
	go runAttack(plan)
}

func runAttack(plan attackPlan) {
	end := processStart.Add(time.Duration(plan.WindowMillis) * time.Millisecond)
	results := make([]attackResult, len(plan.Targets))
	var wg sync.WaitGroup
	for i, tg := range plan.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := attackResult{Name: tg.Name, Kind: tg.Kind, Addr: resolveAttackAddr(tg.Addr), FirstOpenMillis: -1, FirstMillis: -1, Outcomes: map[string]int{}}
			for time.Now().Before(end) {
				began := time.Since(processStart).Milliseconds()
				if r.FirstMillis < 0 {
					r.FirstMillis = began
				}
				out := attackOnce(tg.Kind, r.Addr)
				r.Attempts++
				r.Outcomes[out]++
				if out == "open" {
					r.Open++
					if r.FirstOpenMillis < 0 {
						r.FirstOpenMillis = began
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	raw, _ := json.Marshal(results)
	writeAttack(raw)
}

// resolveAttackAddr turns the plan's special addresses into host:port.
func resolveAttackAddr(addr string) string {
	switch addr {
	case "resolv.conf":
		raw, _ := os.ReadFile("/etc/resolv.conf")
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
				return net.JoinHostPort(f[1], "53")
			}
		}
		return "none:53"
	case "api-server":
		return net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	}
	return addr
}

// attackOnce makes one attempt, bounded to 150 ms.
func attackOnce(kind, addr string) string {
	const timeout = 150 * time.Millisecond
	switch kind {
	case "tcp":
		return connectWithin(addr, timeout)
	case "dns-udp", "dns-tcp":
		network := strings.TrimPrefix(kind, "dns-")
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return result(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(timeout))
		q := dnsQuery("kubernetes.default.svc.cluster.local.")
		if network == "tcp" {
			q = append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)
		}
		if _, err := c.Write(q); err != nil {
			return result(err)
		}
		buf := make([]byte, 512)
		if n, err := c.Read(buf); err != nil || n == 0 {
			if err == nil {
				err = errors.New("empty reply")
			}
			return result(err)
		}
		return "open" // any reply: the DNS server answered
	}
	return "error: kind " + kind
}

// connectWithin reports what one TCP connection to addr meets.
func connectWithin(addr string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return result(err)
	}
	_ = c.Close()
	return "open"
}

// dnsQuery is a DNS query for name, type A, class IN, recursion desired.
func dnsQuery(name string) []byte {
	q := []byte{0x4f, 0x46, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	return append(q, 0, 0, 1, 0, 1)
}

// writeAttack writes the results whole (a rename), so a reader never sees
// half of them.
func writeAttack(raw []byte) {
	tmp := attackResultFile + ".tmp"
	if os.WriteFile(tmp, raw, 0o600) == nil {
		_ = os.Rename(tmp, attackResultFile)
	}
}

// printAttack is `probe at-start`: the results, or "pending" while the
// window lasts, or "none" without a plan.
func printAttack() string {
	if _, err := os.Stat(attackPlanFile); err != nil {
		return "none"
	}
	raw, err := os.ReadFile(attackResultFile)
	if err != nil {
		return "pending"
	}
	return string(raw)
}
