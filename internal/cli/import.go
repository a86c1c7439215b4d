package cli

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// importTimeout bounds one upload and the connector's answer.
const importTimeout = 5 * time.Minute

// importOptions are `openfief plugin import`'s flags and arguments.
type importOptions struct {
	env     *Env
	preview bool
	coreURL string

	// name and file are the arguments NAME and FILE.
	name, file string
}

// newImportCommand builds `openfief plugin import NAME FILE`.
func newImportCommand(env *Env) *cobra.Command {
	o := &importOptions{env: env}
	cmd := &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Send a statement file to a connector plugin and store what it maps",
		Long: `Upload FILE to openfief-core, which streams it to the connector plugin NAME's
ImportFile and stores the delivery as one batch, whole or not at all. Importing
the same file again stores nothing twice. --preview shows what the
delivery holds and stores nothing.

The CLI reaches the core through the API server's service proxy with your
kubeconfig's credentials, so the API server decides whether you may (get or
create on services/proxy of openfief-core in the namespace); --core-url, or
$OPENFIEF_CORE_URL (which 'openfief dev' sets), calls a core at that URL
directly instead. Either way the core takes only the owner's token, which the
CLI mints with your credentials for the serviceaccount openfief-owner (the
Role openfief-owner lets you). The file is at most 32 MiB.`,
		Example: `  openfief plugin import ibkr-main statement.xml
  openfief plugin import ibkr-main statement.xml --preview`,
		Args: exactArgs(2),
		RunE: runOptions(o),
	}
	cmd.Flags().BoolVar(&o.preview, "preview", false, "show what the file maps to and store nothing")
	cmd.Flags().StringVar(&o.coreURL, "core-url", defaultCoreURL(), "call the core's owner API at this URL instead of through the API server's service proxy: https, or http to a loopback address (default $"+EnvCoreURL+")")
	return cmd
}

// Complete takes NAME and FILE.
func (o *importOptions) Complete(args []string) error {
	o.name, o.file = args[0], args[1]
	return nil
}

// Validate refuses an invalid plugin name; FILE is checked when Run opens it.
func (o *importOptions) Validate() error {
	if err := plugins.ValidateName(o.name); err != nil {
		return exitf(ExitInvalid, "plugin name: %w", err)
	}
	return nil
}

// Run uploads FILE to the core, which hands it to the plugin, and prints
// what the delivery held.
func (o *importOptions) Run(ctx context.Context) error {
	name, file := o.name, o.file
	f, err := os.Open(file)
	if err != nil {
		return exitf(ExitUsage, "%w", err)
	}
	defer func() { _ = f.Close() }() // read only: a close error loses nothing
	info, err := f.Stat()
	if err != nil {
		return exitf(ExitUsage, "%w", err)
	}
	if info.Size() > ownerapi.MaxImportBytes {
		return exitf(ExitInvalid, "%s is %d bytes; the core takes at most %d", file, info.Size(), ownerapi.MaxImportBytes)
	}
	api, err := o.env.coreAPI(o.coreURL, importTimeout)
	if err != nil {
		return err
	}
	var res ownerapi.ImportResponse
	if err := importError(name, api.do(ctx, http.MethodPost, ownerapi.ImportPath(name, o.preview), f, importHeader(file), &res)); err != nil {
		return err
	}
	verb := "stored"
	if o.preview {
		verb = "would bring (preview, nothing stored)"
	}
	fmt.Fprintf(o.env.Out, "%s: %s %d transactions (%d postings), %d balances, %d prices, %d FX rates, %d index readings, %d problems\n",
		name, verb, res.Transactions, res.Postings, res.Balances, res.Prices, res.FxRates, res.IndexReadings, res.Problems)
	if res.Duplicate {
		fmt.Fprintln(o.env.Out, "(this batch had been imported before; only new rows were stored)")
	}
	return nil
}

// importHeader names the uploaded file and its media type, guessed from
// its extension.
func importHeader(file string) http.Header {
	h := http.Header{}
	h.Set(ownerapi.HeaderFileName, filepath.Base(file))
	if mt := mime.TypeByExtension(filepath.Ext(file)); mt != "" {
		h.Set("Content-Type", mt)
	} else {
		h.Set("Content-Type", "application/octet-stream")
	}
	return h
}

// importError gives the core's answer to an import its exit code: a plugin
// the core does not know is ExitNotFound, a file the plugin refused
// ExitInvalid, a refusal of the owner or an answer not from the core
// ExitFailure.
func importError(name string, err error) error {
	var ce *errCoreStatus
	switch {
	case errors.As(err, &ce) && (!ce.fromCore || ce.refusedOwner()):
		return exitf(ExitFailure, "%w", err)
	case errors.As(err, &ce) && ce.code == http.StatusNotFound:
		return exitf(ExitNotFound, "plugin %s: %s", name, display.Message(ce.msg))
	case errors.As(err, &ce) && (ce.code == http.StatusUnprocessableEntity || ce.code == http.StatusForbidden || ce.code == http.StatusRequestEntityTooLarge):
		return exitf(ExitInvalid, "plugin %s refused the file, nothing stored: %s", name, display.Message(ce.msg))
	case err != nil:
		return exitf(ExitFailure, "%w", err)
	}
	return nil
}
