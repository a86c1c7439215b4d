package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
)

// newCoreCommand builds `openfief core`: the record openfief-core keeps.
func newCoreCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "core",
		Short: "Back up and restore the record openfief-core keeps",
		Long: `openfief-core keeps the household's record: every entry the connectors
delivered, their watermarks, each view's place, the data of uninstalled
plugins. 'backup' writes all of it, from one consistent snapshot, while the
core works on; 'restore' puts a backup back, all or nothing.

The core is reached like 'openfief plugin import': through the API server's
service proxy with your kubeconfig's credentials, or --core-url /
$OPENFIEF_CORE_URL, with the owner's token. See docs/operations.md.`,
		Example: `  openfief core backup -o record.backup.gz
  openfief core restore record.backup.gz`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCoreBackupCommand(env), newCoreRestoreCommand(env))
	return cmd
}

// coreBackupOptions are `openfief core backup`'s flags.
type coreBackupOptions struct {
	env     *Env
	output  string
	stop    bool
	coreURL string
}

func newCoreBackupCommand(env *Env) *cobra.Command {
	o := &coreBackupOptions{env: env}
	cmd := &cobra.Command{
		Use:   "backup [-o FILE|-]",
		Short: "Write a backup of the core's whole record to a file or standard output",
		Long: `Stream a backup of openfief-core's whole record: a gzip'd file of JSON lines
taken from one snapshot of the database while syncs and exports go on, with
each table's row count and a SHA-256 of its content in its last line.

With -o FILE the backup is written to FILE.partial and renamed to FILE once
it is whole (a failed backup leaves no FILE), readable by you alone, with its
progress on standard error. With -o - it goes to standard output, which must
not be a terminal. Either way the backup's SHA-256 (of the file's bytes, as
sha256sum computes it) is printed on standard error at the end; the command
fails if the stream ends before the backup's last line.

A backup taken while the core works is its record at one instant; what the
core does after it is not in it. To move the record (a new database, a
reinstall), take a final backup with --stop: the core first stops calling
plugins and stays stopped until it restarts or a restore, so the backup is
its record's last state and the restored core goes on exactly from there.`,
		Example: `  openfief core backup -o record-$(date +%F).backup.gz
  openfief core backup -o final.backup.gz --stop
  openfief core backup -o - | ssh nas 'cat > openfief.backup.gz'`,
		Args: noArgs,
		RunE: runOptions(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "FILE to write the backup to, or - for standard output (required)")
	cmd.Flags().BoolVar(&o.stop, "stop", false, "a final backup: the core stops calling plugins first and stays stopped until it restarts or a restore")
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "call the core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	return cmd
}

// Complete takes nothing from arguments.
func (o *coreBackupOptions) Complete([]string) error { return nil }

// Validate requires -o and refuses to write a backup's bytes to a terminal.
func (o *coreBackupOptions) Validate() error {
	switch {
	case o.output == "":
		return usageError(errors.New("-o/--output: give FILE, or - for standard output"))
	case o.output == "-" && isTerminal(o.env.Out):
		return usageError(errors.New("-o -: standard output is a terminal, and a backup is binary: redirect it, or give -o FILE"))
	}
	return nil
}

// isTerminal tells whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Run streams the backup from the core into the output.
func (o *coreBackupOptions) Run(ctx context.Context) (err error) {
	env := o.env
	api, err := env.coreAPI(o.coreURL, 0) // streams: bounded by ctx, not a timeout
	if err != nil {
		return err
	}
	out := env.Out
	var file *os.File
	if o.output != "-" {
		if file, err = os.OpenFile(o.output+".partial", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return exitf(ExitUsage, "%w", err)
		}
		defer func() {
			if err != nil {
				_ = file.Close()
				_ = os.Remove(file.Name())
			}
		}()
		out = file
	}
	resp, err := api.send(ctx, http.MethodGet, ownerapi.BackupPath(o.stop), nil, nil)
	if err != nil {
		return exitf(ExitFailure, "backup: %w", err)
	}
	defer resp.Body.Close()
	sum := sha256.New()
	check := newBackupCheck()
	var n atomic.Int64
	stop := make(chan struct{})
	if file != nil {
		go progress(env.ErrOut, "received", &n, stop)
	}
	_, err = io.Copy(io.MultiWriter(out, sum, check, counter{&n}), resp.Body)
	close(stop)
	if err != nil {
		return exitf(ExitFailure, "backup: the stream from the core broke after %d bytes: %w", n.Load(), err)
	}
	tr, err := check.finish()
	if err != nil {
		return exitf(ExitFailure, "backup: after %d bytes: %w", n.Load(), err)
	}
	if file != nil {
		if err := file.Sync(); err != nil {
			return exitf(ExitFailure, "backup: %w", err)
		}
		if err := file.Close(); err != nil {
			return exitf(ExitFailure, "backup: %w", err)
		}
		if err := os.Rename(file.Name(), o.output); err != nil {
			return exitf(ExitFailure, "backup: %w", err)
		}
	}
	var rows int64
	for _, r := range tr.Rows {
		rows += r
	}
	where := "standard output"
	if file != nil {
		where = o.output
	}
	fmt.Fprintf(env.ErrOut, "backup: %d rows in %d tables, %d bytes, written to %s\n", rows, len(tr.Rows), n.Load(), display.Text(where))
	fmt.Fprintf(env.ErrOut, "sha256: %s\n", hex.EncodeToString(sum.Sum(nil)))
	if o.stop {
		fmt.Fprintln(env.ErrOut, "openfief-core calls no plugin until it restarts or a backup is restored into it")
	}
	return nil
}

// counter counts the bytes written through it.
type counter struct{ n *atomic.Int64 }

func (c counter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// progress prints how many bytes went through every few seconds until stop.
func progress(w io.Writer, verb string, n *atomic.Int64, stop <-chan struct{}) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fmt.Fprintf(w, "%s %.1f MiB\n", verb, float64(n.Load())/(1<<20))
		}
	}
}

// backupCheck decompresses a backup as it is written and keeps its last
// line, so the CLI tells a whole backup (gzip's own checksum and length,
// then a trailer) from one the stream cut short. It reads the format's
// trailer only; the restore checks everything.
type backupCheck struct {
	pw   *io.PipeWriter
	done chan error
	tail []byte
}

// maxTrailer bounds the trailer the CLI reads.
const maxTrailer = 64 << 10

func newBackupCheck() *backupCheck {
	pr, pw := io.Pipe()
	c := &backupCheck{pw: pw, done: make(chan error, 1)}
	go func() {
		zr, err := gzip.NewReader(pr)
		if err == nil {
			zr.Multistream(false)
			err = c.keepTail(zr)
		}
		_, _ = io.Copy(io.Discard, pr) // never block the writer
		c.done <- err
	}()
	return c
}

func (c *backupCheck) Write(p []byte) (int, error) {
	_, _ = c.pw.Write(p) // errors show in finish
	return len(p), nil
}

// keepTail reads every line, keeping the last (bounded).
func (c *backupCheck) keepTail(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			c.tail = append(c.tail[:0], line...)
			if len(c.tail) > maxTrailer {
				c.tail = c.tail[:0]
			}
		case errors.Is(err, bufio.ErrBufferFull):
			c.tail = c.tail[:0]
			continue
		case errors.Is(err, io.EOF) && len(line) == 0:
			return nil
		default:
			return fmt.Errorf("the backup is not a whole gzip stream: %w", err)
		}
	}
}

// backupTrailerSeen is the part of a backup's trailer the CLI reports.
type backupTrailerSeen struct {
	T    string           `json:"t"`
	Rows map[string]int64 `json:"rows"`
}

// finish waits for the check and returns the trailer.
func (c *backupCheck) finish() (backupTrailerSeen, error) {
	_ = c.pw.Close()
	var tr backupTrailerSeen
	if err := <-c.done; err != nil {
		return tr, err
	}
	if json.Unmarshal(bytes.TrimSpace(c.tail), &tr) != nil || tr.T != "trailer" {
		return tr, errors.New("the backup ends without its trailer: it is incomplete")
	}
	return tr, nil
}

// coreRestoreOptions are `openfief core restore`'s flags and argument.
type coreRestoreOptions struct {
	env     *Env
	replace bool
	yes     bool
	coreURL string
	file    string
}

func newCoreRestoreCommand(env *Env) *cobra.Command {
	o := &coreRestoreOptions{env: env}
	cmd := &cobra.Command{
		Use:   "restore FILE [--replace] [--yes]",
		Short: "Restore a backup into openfief-core, all or nothing",
		Long: `Send FILE, a backup 'openfief core backup' wrote, to openfief-core, which
stops calling plugins (syncs, file imports, exports) while it restores,
replaces its record in one transaction, and then calls them again: connectors
from the restored watermarks, views from the restored places. The plugins
installed now under the record's names take its data (their UIDs may be new).
Entry numbers go on past a gap, so none the old core handed out after the
backup is handed out again.

The core refuses, and changes nothing, when the backup comes from a newer
schema than it knows, is damaged (checksum, truncation, a line that does not
parse, a table or column the schema lacks, a bound exceeded), or the core's
record holds data and --replace was not given. Install the platform and the
plugins first, then restore. The file is streamed; asks before it restores
unless --yes.`,
		Example: `  openfief core restore record.backup.gz
  openfief core restore record.backup.gz --replace --yes`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	cmd.Flags().BoolVar(&o.replace, "replace", false, "replace a record that holds data (everything the core holds now is lost)")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "restore without asking")
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "call the core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	return cmd
}

// Complete takes FILE.
func (o *coreRestoreOptions) Complete(args []string) error {
	o.file = args[0]
	return nil
}

// Validate checks nothing before FILE is opened.
func (o *coreRestoreOptions) Validate() error { return nil }

// Run asks, then streams FILE to the core's restore.
func (o *coreRestoreOptions) Run(ctx context.Context) error {
	env := o.env
	f, err := os.Open(o.file)
	if err != nil {
		return exitf(ExitUsage, "%w", err)
	}
	defer func() { _ = f.Close() }() // read only
	info, err := f.Stat()
	if err != nil {
		return exitf(ExitUsage, "%w", err)
	}
	if !info.Mode().IsRegular() {
		return exitf(ExitUsage, "%s is not a regular file", display.Text(o.file))
	}
	if info.Size() > ownerapi.MaxRestoreBytes {
		return exitf(ExitInvalid, "%s is %d bytes; the core takes at most %d", display.Text(o.file), info.Size(), ownerapi.MaxRestoreBytes)
	}
	what := describeBackup(f)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return exitf(ExitFailure, "%w", err)
	}
	question := fmt.Sprintf("Restore %s (%s) into openfief-core? The core stops calling plugins until it is done.", display.Text(filepath.Base(o.file)), what)
	if o.replace {
		question += " Everything the core holds now is REPLACED."
	}
	if err := env.confirm(ctx, o.yes, question, "restoring "+display.Text(filepath.Base(o.file))); err != nil {
		return err
	}
	api, err := env.coreAPI(o.coreURL, 0) // streams: bounded by ctx, not a timeout
	if err != nil {
		return err
	}
	var n atomic.Int64
	stop := make(chan struct{})
	go progress(env.ErrOut, "sent", &n, stop)
	h := http.Header{}
	h.Set("Content-Type", ownerapi.BackupMediaType)
	// Only the file itself as the body (not an *os.File, whose length Go
	// would not take): sent with chunked transfer encoding as it is read.
	body := io.TeeReader(struct{ io.Reader }{f}, counter{&n})
	var res ownerapi.RestoreResponse
	err = api.do(ctx, http.MethodPost, ownerapi.RestorePath(o.replace), body, h, &res)
	close(stop)
	if err != nil {
		return restoreError(err)
	}
	fmt.Fprintf(env.Out, "restored %d rows (schema version %d, taken %s from %s", res.RowsTotal, res.Schema, res.Time.UTC().Format(time.RFC3339), display.Text(res.Database))
	if res.Core != "" {
		fmt.Fprintf(env.Out, " by core %s", display.Text(res.Core))
	}
	fmt.Fprintln(env.Out, ")")
	var replaced int64
	for _, v := range res.Replaced {
		replaced += v
	}
	if replaced > 0 {
		fmt.Fprintf(env.Out, "replaced what the core held: %d rows\n", replaced)
	}
	fmt.Fprintln(env.Out, "openfief-core calls the plugins again: connectors from the restored watermarks, views from the restored places")
	return nil
}

// describeBackup reads a backup's header for the question (bounded; the
// core checks the whole file).
func describeBackup(r io.Reader) string {
	zr, err := gzip.NewReader(io.LimitReader(r, 1<<20))
	if err != nil {
		return "not a gzip file: the core will refuse it"
	}
	line, err := bufio.NewReaderSize(io.LimitReader(zr, 64<<10), 64<<10).ReadSlice('\n')
	if err != nil {
		return "no backup header: the core will refuse it"
	}
	var h struct {
		Schema   []int     `json:"schema"`
		Database string    `json:"database"`
		Core     string    `json:"core"`
		Time     time.Time `json:"time"`
	}
	if json.Unmarshal(line, &h) != nil {
		return "no backup header: the core will refuse it"
	}
	v := 0
	if len(h.Schema) > 0 {
		v = h.Schema[len(h.Schema)-1]
	}
	return fmt.Sprintf("taken %s from %s, schema version %d", h.Time.UTC().Format(time.RFC3339), display.Limit(h.Database, 16), v)
}

// restoreError gives a refused restore its exit code: a backup or record
// the core refuses is ExitInvalid (nothing changed), anything else
// ExitFailure.
func restoreError(err error) error {
	var ce *errCoreStatus
	switch {
	case errors.As(err, &ce) && ce.fromCore && !ce.refusedOwner() && ce.code == http.StatusConflict && strings.Contains(ce.msg, "not empty"):
		return exitf(ExitInvalid, "restore refused, nothing changed: %s (rerun with --replace to replace it)", display.Message(ce.msg))
	case errors.As(err, &ce) && ce.fromCore && !ce.refusedOwner() &&
		(ce.code == http.StatusConflict || ce.code == http.StatusBadRequest || ce.code == http.StatusUnprocessableEntity || ce.code == http.StatusRequestEntityTooLarge):
		return exitf(ExitInvalid, "restore refused, nothing changed: %s", display.Message(ce.msg))
	}
	return exitf(ExitFailure, "restore: %w", err)
}
