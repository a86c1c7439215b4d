package devstack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// newCopyCommand builds `openfief dev copy`: CopyImage into the registry of
// the `openfief dev` whose state directory is given.
func newCopyCommand(env *cli.Env) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "copy IMAGE REPOSITORY",
		Short: "Copy an image with its signatures into the running dev platform's registry",
		Long: `copy copies IMAGE (repository@sha256:<hex>) from its registry into the
registry of the 'openfief dev' running with --state-dir, under REPOSITORY
(such as vendors/acme-fx), together with what is attached to its digest: the
cosign signature bundles and attestations (OCI referrers, or cosign's
sha256-<hex> tag on a registry without the Referrers API). A plain copy
(crane copy, docker push) leaves them behind, and the operator then refuses
the copy as Unsigned. The digest does not change, so the signatures still
verify.

It prints the copy's name as a Plugin names it and the node pulls it, for
'openfief plugin install --image'; that name differs from the address it
pushed to only with --in-cluster. The source is read with your registry
credentials as crane and cosign find them, over HTTPS unless it is on
loopback. At most 32 referrers are copied, as many as the operator reads.`,
		Example: `  openfief dev copy ghcr.io/acme/fx@sha256:<hex> vendors/acme-fx
  openfief plugin install fx --image "$(openfief dev copy 127.0.0.1:5000/acme/fx@sha256:<hex> vendors/acme-fx)"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return cli.UsageError(fmt.Errorf("%q takes 2 arguments, got %d: usage: %s", cmd.CommandPath(), len(args), cmd.UseLine()))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runCopy(cmd, env, dir, args)
			var ee *cli.ExitError
			if err != nil && !errors.As(err, &ee) {
				err = &cli.ExitError{Code: cli.ExitFailure, Err: err}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "state-dir", ".openfief-dev", "the state directory of the running 'openfief dev'")
	return cmd
}

// runCopy is `openfief dev copy`'s body; args are IMAGE and REPOSITORY.
func runCopy(cmd *cobra.Command, env *cli.Env, dir string, args []string) error {
	src, err := plugins.ParseImageRef(args[0])
	if err != nil {
		return cli.UsageError(fmt.Errorf("IMAGE: %w", err))
	}
	file := filepath.Join(dir, "env")
	vars, err := readEnvFile(file)
	if err != nil {
		return fmt.Errorf("the registry of openfief dev: %w; is it running with --state-dir %s?", err, dir)
	}
	pull, push := vars["OPENFIEF_REGISTRY"], vars[EnvRegistryPush]
	if pull == "" || push == "" {
		return fmt.Errorf("%s names no OPENFIEF_REGISTRY or %s; is 'openfief dev' running with --state-dir %s, and of this version?", file, EnvRegistryPush, dir)
	}
	res, err := CopyImage(cmd.Context(), src, push, pull, args[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(env.ErrOut, "copied %s with %d referrer(s) (signatures, attestations) to %s\n", display.Text(src.String()), len(res.Referrers), push+"/"+args[1])
	if res.Skipped > 0 {
		fmt.Fprintf(env.ErrOut, "%d more referrer(s) not copied: the operator reads only the first %d\n", res.Skipped, len(res.Referrers))
	}
	fmt.Fprintln(env.Out, res.Image.String())
	return nil
}

// maxEnvFile bounds the env file readEnvFile reads.
const maxEnvFile = 64 << 10

// readEnvFile reads the exports of the env file writeEnv writes, at most
// maxEnvFile bytes of it (parseEnv).
func readEnvFile(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	raw, err := io.ReadAll(io.LimitReader(f, maxEnvFile+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxEnvFile {
		return nil, fmt.Errorf("%s is longer than %d bytes", file, maxEnvFile)
	}
	return parseEnv(raw)
}

// parseEnv reads the `export NAME="value"` lines of raw (values quoted as
// Go quotes them) into a map; other lines are skipped.
func parseEnv(raw []byte) (map[string]string, error) {
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			vars[k] = uq
		}
	}
	return vars, sc.Err()
}
