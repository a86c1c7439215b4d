// Command webdav-csv is OpenFief's first-party view plugin: it keeps the
// household's record as monthly CSV files in a WebDAV folder of the owner's
// choosing (OF-35). It wires the adapter in internal/views/webdavcsv to the
// Go SDK: the instance's config from OPENFIEF_CONFIG, the username and
// password read from the webdav-credentials Secret (mounted at
// /etc/openfief/webdav-csv, found through openfief.SecretDir) on every
// export, the owner's server reached
// only through the SDK's egress client (HTTPS_PROXY and
// OPENFIEF_EGRESS_TOKEN_FILE, D-63), and the core served with
// openfief.ServeView. It logs nothing but a fatal start-up error, which
// never holds a credential.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	openfief "github.com/arkadiuss/openfief/sdk/go"

	"github.com/arkadiuss/openfief/internal/views/webdavcsv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "webdav-csv:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg webdavcsv.Config
	if err := openfief.LoadConfig(&cfg); err != nil {
		return err
	}
	client, err := openfief.NewEgressClient()
	if err != nil {
		return err
	}
	creds, err := openfief.SecretDir(webdavcsv.DefaultCredentialsDir)
	if err != nil {
		return err
	}
	v, err := webdavcsv.New(cfg, webdavcsv.WithHTTPClient(client), webdavcsv.WithCredentialsDir(creds))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return openfief.ServeView(ctx, v)
}
