package egress

import (
	"flag"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// idleTunnels is how many concurrent idle tunnels BenchmarkCompareIdleTunnels
// opens through each proxy, when the open-file limit allows
// (-idle-tunnels N changes it).
var idleTunnels = flag.Int("idle-tunnels", 10_000, "concurrent idle tunnels BenchmarkCompareIdleTunnels opens through each proxy")

// fdsPerTunnel is what one tunnel costs this test process: the client's end
// and the echo server's end (each proxy process holds its own two).
const fdsPerTunnel = 2

// fdSlack is what the test process keeps for everything else.
const fdSlack = 512

// relayFDsPerTunnel is what one idle tunnel costs the bare relay: its two
// sockets and, for each direction, the pipe io.Copy splices through, which
// it holds while it waits for the next byte. The relay's tunnels are capped
// so that they fit its open-file limit.
const relayFDsPerTunnel = 6

// raiseFileLimit raises the open-file limit (soft, and hard when the process
// may) to fit want tunnels, and returns the soft limit and how many tunnels
// fit: the proxies, started afterwards, inherit it. It logs what the machine
// allowed.
func raiseFileLimit(b *testing.B, want int) (uint64, int) {
	b.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	need := uint64(want*fdsPerTunnel + fdSlack)
	before := lim
	if lim.Max < need {
		raised := syscall.Rlimit{Cur: need, Max: need}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		}
	}
	if lim.Cur < min(need, lim.Max) {
		lim.Cur = min(need, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			b.Fatal(err)
		}
	}
	fit := min(want, int((lim.Cur-fdSlack)/fdsPerTunnel))
	b.Logf("open-file limit: soft %d hard %d at start, soft %d hard %d now: %d concurrent tunnels per proxy (the relay: at most %d)",
		before.Cur, before.Max, lim.Cur, lim.Max, fit, (lim.Cur-fdSlack)/relayFDsPerTunnel)
	return lim.Cur, fit
}

// processFDs returns how many files process pid has open, from /proc.
func processFDs(pid int) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents), err
}

// BenchmarkCompareIdleTunnels opens idleTunnels (or as many as the
// open-file limit allows; the log says) concurrent tunnels through each
// proxy process to a loopback echo, each carrying one byte and then left
// idle, and reports each proxy's growth in resident memory per open tunnel
// (KiB) and in open files per tunnel, the tunnels it held, and
// ours/relay-mem, ours/smokescreen-mem. The relay holds three times the
// files per tunnel, so it gets fewer tunnels when the limit is short. One
// iteration is the whole measurement; run it with -benchtime 1x.
func BenchmarkCompareIdleTunnels(b *testing.B) {
	limit, n := raiseFileLimit(b, *idleTunnels)
	echo, echoOpen := startEchoPort(b)
	type proxyProc struct {
		path proxyPath
		proc *os.Process
	}
	relay, relayProc := startProxyProcess(b, "relay", "", echo)
	procs := []proxyProc{{relay, relayProc}}
	if _, err := smokescreenBinary(); err != nil {
		b.Logf("SKIP smokescreen: cannot build the pinned tool: %v", err)
	} else {
		ss, ssProc := startSmokescreen(b)
		procs = append(procs, proxyProc{ss, ssProc})
	}
	ours, oursProc := startProxyProcess(b, "ours", os.Getenv(benchProfileEnv), echo)
	procs = append(procs, proxyProc{ours, oursProc})
	auth := basic(ProxyUser, benchToken())
	open := func(p proxyPath) net.Conn {
		c, err := p.open(echo, auth)
		if err != nil {
			b.Fatal(err)
		}
		echoByte(b, c)
		return c
	}
	per := map[string]float64{}
	fds := map[string]float64{}
	count := map[string]int{}
	for b.Loop() {
		for _, p := range procs {
			k := n
			if p.path.name == "relay" {
				k = min(n, int((limit-fdSlack)/relayFDsPerTunnel))
			}
			count[p.path.name] = k
			mustClose(b, open(p.path)) // warm up: the review cache, lazily built state
			before, err := processRSS(p.proc.Pid)
			if err != nil {
				b.Fatal(err)
			}
			fdsBefore, err := processFDs(p.proc.Pid)
			if err != nil {
				b.Fatal(err)
			}
			conns := make([]net.Conn, 0, k)
			for i := range k {
				c, err := p.path.open(echo, auth)
				if err != nil {
					own, _ := processFDs(os.Getpid())
					b.Fatalf("%s: tunnel %d of %d: %v (this process has %d files open)", p.path.name, i+1, k, err, own)
				}
				conns = append(conns, c)
				echoByte(b, c)
			}
			after, err := processRSS(p.proc.Pid)
			if err != nil {
				b.Fatal(err)
			}
			fdsAfter, err := processFDs(p.proc.Pid)
			if err != nil {
				b.Fatal(err)
			}
			fds[p.path.name] = float64(fdsAfter-fdsBefore) / float64(k)
			for _, c := range conns {
				mustClose(b, c)
			}
			// The echo's ends close as the proxy passes the closes on;
			// the next proxy's tunnels need their file descriptors.
			for echoOpen() > 0 {
				time.Sleep(10 * time.Millisecond)
			}
			per[p.path.name] = float64(after-before) / float64(k) / 1024
		}
	}
	for _, p := range procs {
		name := p.path.name
		b.ReportMetric(per[name], name+"-KiB/tunnel")
		b.ReportMetric(fds[name], name+"-files/tunnel")
		b.ReportMetric(float64(count[name]), name+"-tunnels")
	}
	for _, ref := range []string{"relay", "smokescreen"} {
		if _, ok := per[ref]; ok {
			b.ReportMetric(per["ours"]/per[ref], "ours/"+ref+"-mem")
		}
	}
}

// echoByte sends one byte through c and reads it back from the echo.
func echoByte(b *testing.B, c net.Conn) {
	buf := []byte{1}
	if _, err := c.Write(buf); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		b.Fatal(err)
	}
}
