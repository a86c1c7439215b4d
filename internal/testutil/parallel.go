package testutil

import (
	"flag"
	"fmt"
)

// WaitBoundParallel sets -test.parallel to n unless the command line gave
// it, for a TestMain to call before m.Run. go test's default is GOMAXPROCS,
// which on two cores runs two parallel tests at once; tests that spend
// their time waiting on pods, not on the CPU, are held back by it for
// nothing.
func WaitBoundParallel(n int) error {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return nil
	}
	if err := flag.Set("test.parallel", fmt.Sprint(n)); err != nil {
		return fmt.Errorf("testutil: -test.parallel: %w", err)
	}
	return nil
}
