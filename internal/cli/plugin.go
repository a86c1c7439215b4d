package cli

import "github.com/spf13/cobra"

// newPluginCommand builds `openfief plugin` and its subcommands.
func newPluginCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "plugin",
		Aliases: []string{"plugins"},
		Short:   "Verify, install, approve, inspect, roll back and uninstall plugins",
		Long: `Manage plugin instances: Plugin resources (the vendor's request, copied from the
image's signed manifest label) and PluginGrant resources (what you approved).
The operator runs a plugin only with what both hold, and only when a trusted
signer signed its image. For plugin authors: init writes a new plugin project,
label writes or checks the manifest label of its image, and test runs an
image through the conformance checks as the platform would run it.`,
		Example: `  openfief plugin verify IMAGE --signers signers.json
  openfief plugin install nbp-fx --image IMAGE --config config.yaml
  openfief plugin approve nbp-fx
  openfief plugin status nbp-fx
  openfief plugin import ibkr-main statement.xml
  openfief plugin upgrade nbp-fx --image NEW-IMAGE
  openfief plugin history nbp-fx
  openfief plugin rollback nbp-fx
  openfief plugin revoke nbp-fx --yes
  openfief plugin uninstall nbp-fx --purge
  openfief plugin purge-data

  # For plugin authors
  openfief plugin init acme-rates --lang go
  openfief plugin label --check registry.example/acme-rates:0.1.0
  openfief plugin test registry.example/acme-rates@sha256:<hex> --key cosign.pub`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newVerifyCommand(env),
		newInstallCommand(env),
		newUpgradeCommand(env),
		newRollbackCommand(env),
		newHistoryCommand(env),
		newApproveCommand(env),
		newRevokeCommand(env),
		newListCommand(env),
		newStatusCommand(env),
		newUninstallCommand(env),
		newPurgeDataCommand(env),
		newWaitCommand(env),
		newImportCommand(env),
		newInitCommand(env),
		newLabelCommand(env),
		newPluginTestCommand(env),
	)
	return cmd
}
