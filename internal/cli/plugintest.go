package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/arkadiuss/openfief/internal/boundedfile"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/harness"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// defaultPluginTestTimeout bounds a whole `openfief plugin test`: the
// plugin's start, the calls and the 30 s SIGTERM grace period.
const defaultPluginTestTimeout = 3 * time.Minute

// maxPluginTestConfig bounds the --config file.
const maxPluginTestConfig = 1 << 20

// pluginTestOptions are `openfief plugin test`'s flags and argument.
type pluginTestOptions struct {
	env   *Env
	trust trustFlags

	key     string
	config  string
	output  string
	timeout time.Duration

	// image is the argument IMAGE; ref is it parsed by Validate.
	image string
	ref   plugins.ImageRef
}

// newPluginTestCommand builds `openfief plugin test`: the conformance
// harness (internal/harness) on an image from its registry.
func newPluginTestCommand(env *Env) *cobra.Command {
	o := &pluginTestOptions{env: env}
	cmd := &cobra.Command{
		Use:   "test IMAGE",
		Short: "Run a plugin image as the platform would and check that it honours the contract",
		Long: `Run IMAGE (repository@sha256:<hex>) on this machine the way the platform runs
a plugin, without a cluster, and report per check: the manifest label is valid
and the image signed by a trusted signer (with --signers or --key; otherwise
that half is skipped, never passed); it serves the contract on its port; it
refuses calls without the core's token, with another instance's, an expired
one; its Sync and ImportFile answers pass the core's delivery rules; a view
keeps a page sent twice; it reaches its hosts only through the egress proxy
and tries no other connection or DNS query; it exits within the 30 s grace
period after SIGTERM; it stays within the default memory limit.

The plugin's root file system runs in namespaces of its own whose only way
out is the project's egress proxy, so the harness needs Linux and root. The
plugin's hosts are answered by stand-ins that complete no TLS: a check that
needs its institution's answer is skipped with the reason.

Exit 0 when no check failed, 1 when one did; the report goes to standard
output, as a table or with -o json.`,
		Example: `  openfief plugin test ghcr.io/example/nbp-fx@sha256:<hex> --signers signers.json

  # The instance config, as the owner would install it with, and JSON output
  openfief plugin test ghcr.io/example/nbp-fx@sha256:<hex> --key cosign.pub --config config.json -o json`,
		Args: exactArgs(1),
		RunE: runOptions(o),
	}
	o.trust.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&o.key, "key", "", "a public key (PEM) the image must be signed with: --signers with one signer of that key")
	cmd.Flags().StringVar(&o.config, "config", "", "the instance config, a JSON file, given to the plugin as OPENFIEF_CONFIG (default: {})")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultPluginTestTimeout, "bounds the whole run")
	return cmd
}

// Complete takes IMAGE.
func (o *pluginTestOptions) Complete(args []string) error {
	o.image = args[0]
	return nil
}

// Validate refuses an IMAGE not pinned by digest, an unknown output, a
// timeout that is not positive, and --signers with --key.
func (o *pluginTestOptions) Validate() error {
	switch {
	case o.output != "text" && o.output != "json":
		return exitf(ExitUsage, "-o %q: want text or json", o.output)
	case o.timeout <= 0:
		return exitf(ExitUsage, "--timeout must be positive")
	case o.key != "" && o.trust.signersFile != "":
		return exitf(ExitUsage, "--key and --signers: give one of them")
	}
	ref, err := parseImage("IMAGE", o.image)
	if err != nil {
		return err
	}
	o.ref = ref
	return nil
}

// Run checks the signature as `plugin verify` does, reads the image, runs
// the harness and prints its report.
func (o *pluginTestOptions) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	config, err := o.readConfig()
	if err != nil {
		return err
	}
	sig, err := o.signature(ctx)
	if err != nil {
		return err
	}
	kc, err := o.trust.keychain()
	if err != nil {
		return err
	}
	img, err := fetchPluginImage(ctx, o.ref, kc, o.trust.insecure)
	if err != nil {
		return err
	}
	start := o.env.pluginRuntime
	if start == nil {
		start = harness.NewRuntime
	}
	rep, err := harness.Run(ctx, harness.Options{Image: img, Name: o.ref.String(), Signature: sig, Config: config, Start: start})
	if errors.Is(err, harness.ErrConfig) {
		return exitf(ExitInvalid, "--config: %w", err)
	}
	if errors.Is(err, harness.ErrNoSandbox) {
		return exitf(ExitFailure, "%w", err)
	}
	if err != nil {
		return exitf(ExitFailure, "plugin test: %s", display.Message(err.Error()))
	}
	if o.output == "json" {
		err = rep.WriteJSON(o.env.Out)
	} else {
		err = rep.WriteText(o.env.Out)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return exitf(ExitFailure, "a check failed")
	}
	return nil
}

// readConfig reads --config, bounded, and requires one JSON value.
func (o *pluginTestOptions) readConfig() ([]byte, error) {
	if o.config == "" {
		return nil, nil
	}
	b, err := boundedfile.Read(o.config, maxPluginTestConfig)
	if err != nil {
		return nil, exitf(ExitUsage, "--config: %w", err)
	}
	if !json.Valid(b) {
		return nil, exitf(ExitInvalid, "--config %s: not a JSON document", o.config)
	}
	return b, nil
}

// signature runs `plugin verify`'s check with --signers, or with --key as a
// signers file of one signer; nil without either.
func (o *pluginTestOptions) signature(ctx context.Context) (*harness.Signature, error) {
	var t trust
	switch {
	case o.key != "":
		pem, err := boundedfile.Read(o.key, maxSignersFile)
		if err != nil {
			return nil, exitf(ExitUsage, "--key: %w", err)
		}
		signers, err := json.Marshal(map[string]any{"signers": []map[string]string{{"name": "key", "publicKey": string(pem)}}})
		if err != nil {
			return nil, err
		}
		if t, err = o.env.policyFromBytes(signers, "the key "+o.key, o.trust.catalogFile); err != nil {
			return nil, err
		}
	case o.trust.signersFile != "":
		var err error
		if t, err = o.env.policyFromFile(o.trust.signersFile, o.trust.catalogFile); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	res, err := o.env.checkImage(ctx, o.ref, t, o.trust)
	if err != nil {
		return nil, err
	}
	v := res.Verification
	if code := ExitCode(res.refusal()); code == ExitRegistryUnavailable || code == ExitRegistryUnauthorized {
		return nil, res.refusal()
	}
	if !v.Verified() {
		return &harness.Signature{Detail: fmt.Sprintf("%s: %s", v.Reason, v.Message)}, nil
	}
	return &harness.Signature{Verified: true, Detail: fmt.Sprintf("%s by %s", v.Reason, v.Signer)}, nil
}
