package storetest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// backupCases are the suite's cases of backup and restore.
var backupCases = []struct {
	name string
	run  func(*testing.T, Backend)
}{
	{"BackupCoversEveryTable", testBackupCoversEveryTable},
	{"BackupRestoreRoundTrip", testBackupRoundTrip},
	{"BackupWhileImporting", testBackupWhileImporting},
	{"RestoreRefusals", testRestoreRefusals},
	{"RestoreOlderSchema", testRestoreOlderSchema},
	{"RestoreAdoptsAndRenumbers", testRestoreAdopts},
	{"MigrationBacksUpFirst", testMigrationBacksUpFirst},
}

// snapshotTime is the header time of the suite's backups, so that two
// backups of the same record are the same bytes.
var snapshotTime = time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)

// Populate fills s with something in every table: two connectors' imports
// (one of them twice), their sync records, a view's places, the data of
// an uninstalled plugin, and a replica's lease.
func Populate(t testing.TB, s *store.Store) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, step := range []func() error{
		func() error { _, err := s.Claim(ctx, "bank", "11111111-aaaa", at); return err },
		func() error { _, err := s.Import(ctx, "bank", store.KindSync, Sync("b1", 0, 30, "w1")); return err },
		func() error {
			_, err := s.Import(ctx, "bank", store.KindSync, Sync("b2", 20, 30, "w2\n\"quoted\" żółw"))
			return err
		},
		func() error { _, err := s.Import(ctx, "nbp", store.KindFile, Sync("f1", 100, 5, "")); return err },
		func() error {
			return s.RecordSync(ctx, "bank", store.SyncRecord{At: at, OK: false, Error: "bank said \"no\"\ttab", Next: at.Add(time.Hour)})
		},
		func() error {
			return s.AdvanceView(ctx, "csv", map[store.EntryKind]int64{store.KindFxRates: 3, store.KindTransactions: 7})
		},
		func() error { _, err := s.Claim(ctx, "old", "22222222-bbbb", at); return err },
		func() error { _, err := s.Import(ctx, "old", store.KindSync, Sync("o1", 200, 3, "wo")); return err },
		func() error { _, err := s.MarkRemoved(ctx, "old", "22222222-bbbb", at.Add(time.Minute)); return err },
		func() error {
			_, _, err := s.AcquireLease(ctx, "bank", "core-0-a1b2c3", "10.0.0.1:8081", time.Hour)
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatalf("populate: %v", err)
		}
	}
}

// backup takes a backup of s at snapshotTime.
func backup(t testing.TB, s *store.Store) ([]byte, store.BackupResult) {
	t.Helper()
	var buf bytes.Buffer
	res, err := s.Backup(context.Background(), &buf, store.BackupOptions{Core: "test", Now: snapshotTime})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	return buf.Bytes(), res
}

func dump(t testing.TB, b Backend, s *store.Store) map[string][]string {
	t.Helper()
	d, err := b.Dump(context.Background(), s)
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	return d
}

// testBackupCoversEveryTable: the tables of the migrated schema are exactly
// the tables a backup covers, so a migration that adds a table fails here
// until the backup holds it.
func testBackupCoversEveryTable(t *testing.T, b Backend) {
	s := open(t, b.NewDSN(t))
	names, err := b.TableNames(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	covered := slices.Sorted(slices.Values(b.BackupTables()))
	if diff := cmp.Diff(covered, names); diff != "" {
		t.Errorf("tables of the schema (+) and tables the backup covers (-) differ: add a new table to backupTables in backup.go:\n%s", diff)
	}
	Populate(t, s)
	_, res := backup(t, s)
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range res.Rows {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, names) {
		t.Errorf("the backup holds tables %v, the schema has %v", got, names)
	}
	for _, tbl := range names {
		if res.Rows[tbl] == 0 {
			t.Errorf("Populate left %s empty: the round trip would not test it", tbl)
		}
	}
}

// testBackupRoundTrip: a restore into a new database gives every table
// exactly as it was, and a backup of the restored record is the same bytes.
func testBackupRoundTrip(t *testing.T, b Backend) {
	src := open(t, b.NewDSN(t))
	Populate(t, src)
	raw, res := backup(t, src)
	dst := open(t, b.NewDSN(t))
	got, err := dst.Restore(context.Background(), bytes.NewReader(raw), store.RestoreOptions{})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if diff := cmp.Diff(res.Rows, got.Rows); diff != "" {
		t.Errorf("restored rows (-backed up +restored):\n%s", diff)
	}
	if diff := cmp.Diff(dump(t, b, src), dump(t, b, dst)); diff != "" {
		t.Errorf("restored record (-source +restored):\n%s", diff)
	}
	again, _ := backup(t, dst)
	if !bytes.Equal(decompress(t, raw), decompress(t, again)) {
		t.Error("a backup of the restored record differs from the backup it was restored from")
	}
	// The restored record works: an import goes on from the counter.
	if _, err := dst.Import(context.Background(), "bank", store.KindSync, Sync("b3", 60, 2, "w3")); err != nil {
		t.Fatalf("import after restore: %v", err)
	}
}

// testBackupWhileImporting: a backup taken while four connectors import
// holds exactly the record as it stood when its snapshot was taken
// (dumped inside the backup's own transaction), although imports committed
// while it was written.
func testBackupWhileImporting(t *testing.T, b Backend) {
	ctx := context.Background()
	src := open(t, b.NewDSN(t))
	var stop atomic.Bool
	var imported atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for c := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := src.Import(ctx, fmt.Sprintf("conn-%d", c), store.KindSync, Sync(fmt.Sprintf("b%d", i), i*5, 5, fmt.Sprintf("w%d", i))); err != nil {
					errs <- err
					return
				}
				imported.Add(1)
			}
		})
	}
	for imported.Load() < 8 {
		time.Sleep(5 * time.Millisecond)
	}
	var atSnapshot map[string][]string
	var during int64
	b.SetBackupHook(src, func(d map[string][]string, err error) {
		if err != nil {
			t.Errorf("dump in the backup's transaction: %v", err)
		}
		atSnapshot = d
		// Let imports commit while the backup is written.
		start := imported.Load()
		for imported.Load() < start+4 && len(errs) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		during = imported.Load() - start
	})
	raw, _ := backup(t, src)
	b.SetBackupHook(src, nil)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("import beside the backup: %v", err)
	}
	if during == 0 {
		t.Fatal("no import committed while the backup was taken: the test proves nothing")
	}
	dst := open(t, b.NewDSN(t))
	if _, err := dst.Restore(ctx, bytes.NewReader(raw), store.RestoreOptions{}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if diff := cmp.Diff(atSnapshot, dump(t, b, dst)); diff != "" {
		t.Errorf("restored record (-at the snapshot +restored):\n%s", diff)
	}
	if cmp.Equal(atSnapshot, dump(t, b, src)) {
		t.Error("the source did not change after the snapshot: the test proves nothing")
	}
}

// testRestoreRefusals: each refusal names what it refused and changes
// nothing in the record it was to replace.
func testRestoreRefusals(t *testing.T, b Backend) {
	ctx := context.Background()
	src := open(t, b.NewDSN(t))
	Populate(t, src)
	raw, _ := backup(t, src)
	lines := Lines(t, raw)

	dst := open(t, b.NewDSN(t))
	if _, err := dst.Import(ctx, "other", store.KindSync, Sync("x1", 500, 4, "wx")); err != nil {
		t.Fatal(err)
	}
	before := dump(t, b, dst)

	withRow := func(table string, edit func(string) string) []string {
		out := slices.Clone(lines)
		in := false
		for i, l := range out {
			if strings.HasPrefix(l, `{"t":"table","name":"`+table+`"`) {
				in = true
				continue
			}
			if in && strings.HasPrefix(l, "[") {
				out[i] = edit(l)
				return out
			}
		}
		t.Fatalf("no row of %s", table)
		return nil
	}
	cases := []struct {
		name    string
		backup  []byte
		opts    store.RestoreOptions
		want    error
		message string
	}{
		{"not empty", raw, store.RestoreOptions{}, store.ErrRecordNotEmpty, "replace"},
		{"newer schema", Reseal(t, replaceFirst(lines, `"schema":[1,2,3,4]`, `"schema":[1,2,3,4,5]`)), replace, store.ErrNewerSchema, "schema version 5"},
		{"checksum", Gzip(t, withRow("problems", func(l string) string { return strings.TrimSuffix(l, `"]`) + `x"]` })), replace, store.ErrDamagedBackup, "checksum"},
		{"truncated", raw[:len(raw)*2/3], replace, store.ErrDamagedBackup, "damaged"},
		{"truncated before the trailer", Gzip(t, lines[:len(lines)-1]), replace, store.ErrDamagedBackup, "truncated"},
		{"bad JSON", Reseal(t, withRow("prices", func(l string) string { return l[:len(l)-1] })), replace, store.ErrDamagedBackup, "does not parse"},
		{"unknown table", Reseal(t, replaceFirst(lines, `"name":"view_places"`, `"name":"view_placez"`)), replace, store.ErrDamagedBackup, "view_placez"},
		{"unknown column", Reseal(t, replaceFirst(lines, `"watermark"`, `"watermarx"`)), replace, store.ErrDamagedBackup, "watermarx"},
		{"wrong type", Reseal(t, withRow("counters", func(l string) string { return strings.TrimSuffix(strings.Replace(l, ",", `,"`, 1), "]") + `"]` })), replace, store.ErrDamagedBackup, "integer"},
		{"repeated row", Reseal(t, withRow("instances", func(l string) string { return l + "\n" + l })), replace, store.ErrDamagedBackup, "instances"},
		{"missing table", Reseal(t, dropTable(lines, "problems")), replace, store.ErrDamagedBackup, "problems"},
		{"over the size bound", raw, store.RestoreOptions{Replace: true, MaxBytes: 4096}, store.ErrDamagedBackup, "larger than 4096"},
		{"data after the trailer", Gzip(t, append(slices.Clone(lines), "{}")), replace, store.ErrDamagedBackup, "after the trailer"},
		{"not gzip", []byte("hello"), replace, store.ErrDamagedBackup, "gzip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := dst.Restore(ctx, bytes.NewReader(c.backup), c.opts)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("Restore = %v, want %v naming %q", err, c.want, c.message)
			}
			if diff := cmp.Diff(before, dump(t, b, dst)); diff != "" {
				t.Errorf("a refused restore changed the record (-before +after):\n%s", diff)
			}
		})
	}
	// And the same backup, asked to replace, replaces.
	if _, err := dst.Restore(ctx, bytes.NewReader(raw), replace); err != nil {
		t.Fatalf("Restore with replace: %v", err)
	}
	if diff := cmp.Diff(dump(t, b, src), dump(t, b, dst)); diff != "" {
		t.Errorf("replaced record (-source +restored):\n%s", diff)
	}
}

var replace = store.RestoreOptions{Replace: true}

// testRestoreOlderSchema: a backup of a record at schema version 2 restores
// into this core's schema as the migrations would have carried it.
func testRestoreOlderSchema(t *testing.T, b Backend) {
	ctx := context.Background()
	dsn := b.NewDSN(t)
	old, err := b.OpenAt(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Close() })
	if _, err := old.Import(ctx, "bank", store.KindSync, Sync("b1", 0, 10, "w1")); err != nil {
		t.Fatal(err)
	}
	raw, res := backup(t, old)
	if got := res.Header.Schema; !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("the backup's schema is %v, want [1 2]", got)
	}
	if _, ok := res.Rows["view_places"]; !ok {
		t.Fatal("a backup at version 2 lacks view_places")
	}
	dst := open(t, b.NewDSN(t))
	if _, err := dst.Restore(ctx, bytes.NewReader(raw), store.RestoreOptions{}); err != nil {
		t.Fatalf("Restore of a version 2 backup: %v", err)
	}
	_ = old.Close()
	migrated, err := store.OpenWith(ctx, dsn, store.OpenOptions{PreMigrationBackupDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = migrated.Close() })
	if diff := cmp.Diff(dump(t, b, migrated), dump(t, b, dst)); diff != "" {
		t.Errorf("restored old backup (-the old record migrated +restored):\n%s", diff)
	}
}

// testRestoreAdopts: with Adopt the live instances lose their UID (the
// installed Plugin of the name claims them) and removed ones keep theirs;
// with NewNumbers the next entry's number is past the gap.
func testRestoreAdopts(t *testing.T, b Backend) {
	ctx := context.Background()
	src := open(t, b.NewDSN(t))
	Populate(t, src)
	raw, _ := backup(t, src)
	dst := open(t, b.NewDSN(t))
	if _, err := dst.Restore(ctx, bytes.NewReader(raw), store.RestoreOptions{Adopt: true, NewNumbers: true}); err != nil {
		t.Fatal(err)
	}
	live, err := dst.LiveInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, li := range live {
		if li.UID != "" {
			t.Errorf("live instance %s kept UID %q", li.Name, li.UID)
		}
	}
	removed, err := dst.RemovedInstances(ctx)
	if err != nil || len(removed) != 1 || removed[0].UID == "" {
		t.Errorf("removed instances = %+v, %v; want old's, with its UID", removed, err)
	}
	// A new Plugin of the name adopts the data (no data moves away).
	key, err := dst.Claim(ctx, "bank", "33333333-cccc", time.Now())
	if err != nil || key != "" {
		t.Errorf("Claim after an adopting restore = %q, %v; want adoption", key, err)
	}
	before := drainAll(t, dst, "fresh-view")
	if _, err := dst.Import(ctx, "bank", store.KindSync, Sync("b9", 900, 1, "w9")); err != nil {
		t.Fatal(err)
	}
	after := drainAll(t, dst, "fresh-view")
	if len(after) == 0 || after[0].Seq <= store.NumberGap || (len(before) > 0 && before[len(before)-1].Seq >= store.NumberGap) {
		t.Errorf("entry numbers after the restore: the old ones end at %d, the new start at %v; want the new past %d", lastSeq(before), after, int64(store.NumberGap))
	}
}

func drainAll(t *testing.T, s *store.Store, view string) []store.Entry {
	t.Helper()
	return drain(t, s, view, store.EntryKinds, 1000)
}

func lastSeq(es []store.Entry) int64 {
	if len(es) == 0 {
		return 0
	}
	return es[len(es)-1].Seq
}

// testMigrationBacksUpFirst: a record that holds data is backed up before a
// core migrates it (SQLite: beside the file; PostgreSQL: only into the
// directory given, and without one the core refuses and changes nothing);
// that backup restores the record as it was before the migration.
func testMigrationBacksUpFirst(t *testing.T, b Backend) {
	ctx := context.Background()
	dsn := b.NewDSN(t)
	old, err := b.OpenAt(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Import(ctx, "bank", store.KindSync, Sync("b1", 0, 10, "w1")); err != nil {
		t.Fatal(err)
	}
	beforeMigration := dump(t, b, old)
	_ = old.Close()
	beside := ""
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		beside = filepath.Dir(path)
	} else {
		// PostgreSQL without a directory: refused, nothing migrated.
		_, err := store.Open(ctx, dsn)
		if !errors.Is(err, store.ErrPreMigrationBackupDir) || !strings.Contains(err.Error(), "schema version 2") {
			t.Fatalf("Open of a PostgreSQL record to migrate without a backup directory = %v, want ErrPreMigrationBackupDir", err)
		}
		again, err := b.OpenAt(ctx, dsn, 2)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(beforeMigration, dump(t, b, again)); diff != "" {
			t.Errorf("a refused migration changed the record (-before +after):\n%s", diff)
		}
		_ = again.Close()
	}
	dir := t.TempDir()
	o := store.OpenOptions{PreMigrationBackupDir: dir, Now: func() time.Time { return snapshotTime }}
	if beside != "" {
		o.PreMigrationBackupDir, dir = "", beside
	}
	s, err := store.OpenWith(ctx, dsn, o)
	if err != nil {
		t.Fatalf("Open with a migration to apply: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	files, _ := filepath.Glob(filepath.Join(dir, "*.before-v3-*.backup.gz"))
	if len(files) != 1 {
		t.Fatalf("backups before the migration in %s: %v, want one", dir, files)
	}
	info, err := os.Stat(files[0])
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode: %v, %v; want 0600", info.Mode(), err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// Restored into a database at version 2, it is the record before the
	// migration.
	back, err := b.OpenAt(ctx, b.NewDSN(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = back.Close() })
	if _, err := back.Restore(ctx, bytes.NewReader(raw), store.RestoreOptions{}); err != nil {
		t.Fatalf("restore the backup taken before the migration: %v", err)
	}
	// Restore migrates to this core's schema: compare with the record
	// the migration made.
	if diff := cmp.Diff(dump(t, b, s), dump(t, b, back)); diff != "" {
		t.Errorf("the pre-migration backup restored (-migrated in place +restored):\n%s", diff)
	}
	// An empty record is migrated without a backup, on either database.
	emptyDSN := b.NewDSN(t)
	empty, err := b.OpenAt(ctx, emptyDSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	_ = empty.Close()
	migratedEmpty, err := store.Open(ctx, emptyDSN)
	if err != nil {
		t.Fatalf("Open of an empty record to migrate: %v", err)
	}
	_ = migratedEmpty.Close()
	if path, ok := strings.CutPrefix(emptyDSN, "sqlite:"); ok {
		if files, _ := filepath.Glob(path + ".before-*"); len(files) != 0 {
			t.Errorf("an empty record was backed up before its migration: %v", files)
		}
	}
}

// Lines returns the uncompressed lines of a backup.
func Lines(t testing.TB, raw []byte) []string {
	t.Helper()
	return strings.Split(strings.TrimSuffix(string(decompress(t, raw)), "\n"), "\n")
}

func decompress(t testing.TB, raw []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Gzip compresses lines as a backup is (each ending in a newline).
func Gzip(t testing.TB, lines []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for _, l := range lines {
		if _, err := io.WriteString(zw, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Reseal replaces the trailer of a backup's lines (the last line) with one
// that matches the rest: its tables' row counts and checksum, so the test
// reaches the check it means to.
func Reseal(t testing.TB, lines []string) []byte {
	t.Helper()
	body := lines[:len(lines)-1]
	sum := sha256.New()
	rows := map[string]int64{}
	table := ""
	for _, l := range strings.Split(strings.Join(body, "\n"), "\n") {
		io.WriteString(sum, l+"\n") //nolint:errcheck // a hash never fails
		var head struct{ T, Name string }
		switch {
		case strings.HasPrefix(l, "["):
			rows[table]++
		case json.Unmarshal([]byte(l), &head) == nil && head.T == "table":
			table = head.Name
			rows[table] = 0
		}
	}
	tr, _ := json.Marshal(map[string]any{"t": "trailer", "rows": rows, "sha256": hex.EncodeToString(sum.Sum(nil))})
	return Gzip(t, append(slices.Clone(body), string(tr)))
}

func replaceFirst(lines []string, old, repl string) []string {
	out := slices.Clone(lines)
	for i, l := range out {
		if strings.Contains(l, old) {
			out[i] = strings.Replace(l, old, repl, 1)
			return out
		}
	}
	panic("no line holds " + old)
}

// dropTable removes a table's lines, its end included.
func dropTable(lines []string, table string) []string {
	var out []string
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, `{"t":"table","name":"`+table+`"`):
			in = true
		case in && strings.HasPrefix(l, `{"t":"end"`):
			in = false
		case !in:
			out = append(out, l)
		}
	}
	return out
}
