package store_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/core/store/storetest"
)

// errDiskGone stands for SQLite's file becoming unavailable mid-batch
// (a full or vanished volume): the import fails between two statements.
var errDiskGone = errors.New("disk I/O error (injected)")

// sqliteBackend gives every test its own database file in a temp dir.
func sqliteBackend() storetest.Backend {
	return storetest.Backend{
		NewDSN:        func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "core.db") },
		SetHook:       store.SetImportHook,
		Loaded:        store.LoadedBytes,
		OpenAt:        store.OpenAt,
		Exec:          store.Exec,
		Dump:          store.DumpTables,
		SetBackupHook: store.SetBackupHook,
		TableNames:    store.TableNames,
		BackupTables:  store.BackupTables,
		Interrupt:     func(*testing.T, *store.Store) error { return errDiskGone },
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, sqliteBackend())
}
