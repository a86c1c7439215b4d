package devstack

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	openfief "github.com/arkadiuss/openfief/sdk/go"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// helperPluginEnv makes the test binary play a local plugin (TestMain): it
// takes its listener as the SDK does (openfief.Listen) and answers every
// request with its process ID.
const helperPluginEnv = "OPENFIEF_DEVSTACK_TEST_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(helperPluginEnv) == "1" {
		ln, err := openfief.Listen()
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper plugin:", err)
			os.Exit(2)
		}
		pid := strconv.Itoa(os.Getpid())
		err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, pid) }))
		fmt.Fprintln(os.Stderr, "helper plugin:", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// heldListener opens a loopback listener as the runner does.
func heldListener(t *testing.T) *net.TCPListener {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// bindPort is another local user trying to listen on port: nil when it
// could (the listener is closed again at once).
func bindPort(port int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err == nil {
		_ = ln.Close()
	}
	return err
}

// answeringPID asks url for the process ID of whoever answers.
func answeringPID(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}

// TestKilledLocalPluginKeepsItsPort runs a plugin process as the local
// runner does, on a listener the runner holds, and kills it (SIGKILL):
// no other listener can bind the port while it runs, after the kill, or
// while it is being started again; a connection made while it is dead waits
// in the held listener and is answered by the restarted process, which
// comes within a bound. Stopped, the process is not started again and the
// port stays held until the runner closes the listener.
func TestKilledLocalPluginKeepsItsPort(t *testing.T) {
	ln := heldListener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	url := "http://" + ln.Addr().String() + "/"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	spec := procSpec{bin: os.Args[0], logFile: filepath.Join(t.TempDir(), "plugin.log"), env: []string{helperPluginEnv + "=1"}}
	sup := supervise(t.Context(), log, "helper", spec, ln, defaultRestart)
	defer sup.stop()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	var first int
	testutil.Eventually(t, 10*time.Second, "the plugin process answers on the runner's listener", func() (bool, string) {
		pid, err := answeringPID(client, url)
		first = pid
		return err == nil && pid != os.Getpid(), fmt.Sprint(pid, err)
	})
	if err := bindPort(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("while the plugin runs, another listener binding its port: %v, want EADDRINUSE", err)
	}

	killed := time.Now()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Until the runner has seen the process die, and then until the new one
	// answers, nobody else can take the port.
	for {
		if err := bindPort(port); !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("%v after the kill, another listener binding the plugin's port: %v, want EADDRINUSE", time.Since(killed), err)
		}
		if pid, _ := sup.current(); pid != first {
			break
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatal("the runner did not see the killed process end within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A call made now waits in the held listener for the next process.
	answered := make(chan error, 1)
	var second int
	go func() {
		pid, err := answeringPID(client, url)
		second = pid
		answered <- err
	}()
	for done := false; !done; {
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("a call made while the plugin was down: %v, want the restarted plugin's answer", err)
			}
			done = true
		case <-time.After(5 * time.Millisecond):
			if err := bindPort(port); !errors.Is(err, syscall.EADDRINUSE) {
				t.Fatalf("while the plugin is started again, another listener binding its port: %v, want EADDRINUSE", err)
			}
		}
	}
	restarted := time.Since(killed)
	pid, starts := sup.current()
	if second == first || second != pid || starts != 2 {
		t.Fatalf("answered by process %d; killed %d, running %d after %d starts; want the second process", second, first, pid, starts)
	}
	if bound := 5 * time.Second; restarted > bound {
		t.Errorf("restarted %v after the kill, want within %v", restarted, bound)
	}
	t.Logf("restarted and answering %v after the kill", restarted)

	sup.stop()
	if err := syscall.Kill(second, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after stop: kill 0 = %v, want ESRCH (gone)", second, err)
	}
	time.Sleep(3 * defaultRestart.first)
	if pid, starts := sup.current(); pid != 0 || starts != 2 {
		t.Errorf("after stop: process %d, %d starts; want none started again", pid, starts)
	}
	if err := bindPort(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("stopped but still routed: another listener binding the port: %v, want EADDRINUSE", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bindPort(port); err != nil {
		t.Errorf("the runner closed the listener, yet binding its port: %v (the test's bind must be able to succeed)", err)
	}
}

// TestCrashingLocalPluginBacksOff: a process that ends at once is started
// again with a growing wait, not in a tight loop, and the port stays held.
func TestCrashingLocalPluginBacksOff(t *testing.T) {
	ln := heldListener(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	spec := procSpec{bin: "/bin/false", logFile: filepath.Join(t.TempDir(), "plugin.log")}
	policy := restartPolicy{first: 50 * time.Millisecond, max: 400 * time.Millisecond, stable: time.Minute}
	sup := supervise(t.Context(), log, "crasher", spec, ln, policy)
	time.Sleep(1500 * time.Millisecond)
	sup.stop()
	// Waits 50, 100, 200, 400, 400… ms: 5 or 6 starts in 1.5 s.
	if _, starts := sup.current(); starts < 3 || starts > 7 {
		t.Errorf("%d starts in 1.5 s, want 5 or 6 with waits of 50 ms doubling to 400 ms", starts)
	}
	if err := bindPort(ln.Addr().(*net.TCPAddr).Port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("binding a crashing plugin's port: %v, want EADDRINUSE", err)
	}
}

func TestRestartPolicy(t *testing.T) {
	p := restartPolicy{first: time.Second, max: 8 * time.Second, stable: time.Minute}
	var got []string
	wait := time.Duration(0)
	for _, ran := range []time.Duration{0, time.Second, 0, 0, 0, 0, 2 * time.Minute, 0} {
		wait = p.after(wait, ran)
		got = append(got, wait.String())
	}
	if want := "1s 2s 4s 8s 8s 8s 1s 2s"; strings.Join(got, " ") != want {
		t.Errorf("waits %s, want %s", strings.Join(got, " "), want)
	}
}

// TestRemovedRouteListenerHeld: a removed route's listener stays held for
// the hold (a call the core resolved just before may still dial it), then
// is closed; once the runner stopped, at once.
func TestRemovedRouteListenerHeld(t *testing.T) {
	lp := &localPlugins{hold: 300 * time.Millisecond, routes: map[string]*localRoute{}, held: map[*net.TCPListener]*time.Timer{}}
	ln := heldListener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	lp.release(ln)
	if err := bindPort(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("binding a just removed route's port: %v, want EADDRINUSE", err)
	}
	testutil.Eventually(t, 5*time.Second, "the listener is closed after the hold", func() (bool, string) {
		err := bindPort(port)
		return err == nil, fmt.Sprint(err)
	})

	ln2 := heldListener(t)
	lp.hold = time.Hour
	lp.release(ln2)
	lp.stopAll()
	if err := bindPort(ln2.Addr().(*net.TCPAddr).Port); err != nil {
		t.Errorf("after the runner stopped, binding a held port: %v, want it closed", err)
	}
	ln3 := heldListener(t)
	lp.release(ln3)
	if err := bindPort(ln3.Addr().(*net.TCPAddr).Port); err != nil {
		t.Errorf("released after the runner stopped: %v, want it closed at once", err)
	}
}
