package memlimit

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/testutil"
)

// memlimitChildEnv names the memory cgroup a child of
// TestSetFromCgroup waits to be moved into.
const memlimitChildEnv = "OPENFIEF_MEMLIMIT_CHILD_CGROUP"

// TestMain runs the tests, or, in a child TestSetFromCgroup started, reports
// the memory limit Set gave it.
func TestMain(m *testing.M) {
	if os.Getenv(memlimitChildEnv) != "" {
		os.Exit(runMemlimitChild())
	}
	os.Exit(m.Run())
}

// runMemlimitChild waits until its parent has moved it into the cgroup,
// calls Set and prints what it returned and the runtime's limit.
func runMemlimitChild() int {
	if err := testutil.WaitInMemoryCgroup(os.Getenv(memlimitChildEnv), 10*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set, err := Set(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(set, debug.SetMemoryLimit(-1))
	return 0
}

// TestSetFromCgroup runs this binary as a child in a memory
// cgroup of 300 MiB, as a container with that limit: the Go runtime's soft
// limit becomes 90% of it, and a GOMEMLIMIT in the environment wins.
func TestSetFromCgroup(t *testing.T) {
	const limit = 300 << 20
	cases := []struct {
		name      string
		env       []string
		set, have int64
	}{
		{"from the cgroup", nil, limit * 9 / 10, limit * 9 / 10},
		{"GOMEMLIMIT kept", []string{"GOMEMLIMIT=123MiB"}, 0, 123 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cg := testutil.NewMemoryCgroup(t, limit)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(append(os.Environ(), memlimitChildEnv+"="+cg.Path), c.env...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := cg.Add(cmd.Process.Pid); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("move the child into %s: %v", cg.Dir, err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v; %s", err, errOut.String())
			}
			fields := strings.Fields(out.String())
			if len(fields) != 2 {
				t.Fatalf("child printed %q", out.String())
			}
			set, _ := strconv.ParseInt(fields[0], 10, 64)
			have, _ := strconv.ParseInt(fields[1], 10, 64)
			if set != c.set || have != c.have {
				t.Errorf("Set returned %d and the runtime's limit is %d; want %d and %d", set, have, c.set, c.have)
			}
		})
	}
}
