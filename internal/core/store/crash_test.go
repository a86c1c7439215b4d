package store_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// crashEnv names the SQLite file a child test process imports into and is
// killed in the middle of.
const crashEnv = "OPENFIEF_STORE_CRASH_DB"

// crashBatch is the import the crash interrupts: 1,000 transactions after
// the first ten, so several statements per table.
func crashBatch() *connectorv1.Delivery { return storetest.Sync("b2", 5, 1000, "w2") }

// TestSQLiteProcessCrash kills the process (SIGKILL, no deferred code, no
// rollback) in the middle of an import's transaction, then opens the file
// again: nothing of the batch is there, the watermark is the old one, and
// the retry stores everything once.
func TestSQLiteProcessCrash(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(t, path)
		return
	}
	t.Parallel()
	// Mid-batch, and with every statement run, just before the commit.
	for name, step := range map[string]int{"mid-batch": 5, "before-commit": importSteps(t)} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "core.db")
			s, err := store.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			before, err := s.Import(context.Background(), "nbp-fx", store.KindSync, storetest.Sync("b1", 0, 10, "w1"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteProcessCrash$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnv+"="+path, crashStepEnv+"="+strconv.Itoa(step))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed mid-import: %v\n%s", err, out)
			}

			s, err = store.Open(context.Background(), path)
			if err != nil {
				t.Fatalf("Open after the crash: %v", err)
			}
			defer func() { _ = s.Close() }()
			checkCounts(t, s, "nbp-fx", before)
			retryImport(t, s)
		})
	}
}

// crashStepEnv is the import step the child kills itself at.
const crashStepEnv = "OPENFIEF_STORE_CRASH_STEP"

// importSteps counts the steps of crashBatch's import after the first
// batch; the last is the one just before the commit.
func importSteps(t *testing.T) int {
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "count.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Import(context.Background(), "nbp-fx", store.KindSync, storetest.Sync("b1", 0, 10, "w1")); err != nil {
		t.Fatal(err)
	}
	last := 0
	store.SetImportHook(s, func(step int) error { last = step; return nil })
	if _, err := s.Import(context.Background(), "nbp-fx", store.KindSync, crashBatch()); err != nil {
		t.Fatal(err)
	}
	return last
}

// crashChild imports crashBatch and kills itself at the step crashStepEnv names.
func crashChild(t *testing.T, path string) {
	at, err := strconv.Atoi(os.Getenv(crashStepEnv))
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	store.SetImportHook(s, func(step int) error {
		if step == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
		return nil
	})
	_, err = s.Import(context.Background(), "nbp-fx", store.KindSync, crashBatch())
	t.Fatalf("the import was not killed: %v", err)
}

// retryImport imports crashBatch as a caller with backoff would, until it
// succeeds, and checks that everything is stored exactly once.
func retryImport(t *testing.T, s *store.Store) {
	t.Helper()
	var res store.ImportResult
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if res, err = s.Import(context.Background(), "nbp-fx", store.KindSync, crashBatch()); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if res.Transactions != 995 || res.Postings != 1990 || res.Duplicate {
		t.Errorf("retry stored %+v, want the 995 new transactions", res)
	}
	st, err := s.Status(context.Background(), "nbp-fx")
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows.Transactions != 1005 || st.Rows.Postings != 2010 || st.Rows.Batches != 2 || st.Watermark != "w2" {
		t.Errorf("after the retry: %+v", st)
	}
}

// checkCounts checks that the store holds exactly what before stored, with
// the old watermark.
func checkCounts(t *testing.T, s *store.Store, instance string, before store.ImportResult) {
	t.Helper()
	var st store.InstanceRecord
	var err error
	for attempt := 0; attempt < 10; attempt++ { // the pool may hand out a dead connection first
		if st, err = s.Status(context.Background(), instance); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows.Transactions != before.Transactions || st.Rows.Postings != before.Postings || st.Rows.Batches != 1 || st.Watermark != "w1" {
		t.Errorf("after the crash the store holds %+v, want only the first batch (%+v) and watermark w1", st, before)
	}
	if _, err := s.Transaction(context.Background(), instance, storetest.SourceID(500)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a transaction of the crashed batch: %v, want ErrNotFound", err)
	}
}
