package cli

import "github.com/spf13/cobra"

// newPluginCommand builds `openfief plugin` and its subcommands.
func newPluginCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "plugin",
		Aliases: []string{"plugins"},
		Short:   "Verify, install, approve, inspect and uninstall plugins",
		Long: `Manage plugin instances: Plugin resources (the vendor's request, copied from the
image's signed manifest label) and PluginGrant resources (what you approved).
The operator runs a plugin only with what both hold, and only when a trusted
signer signed its image.`,
		Example: `  openfief plugin verify IMAGE --signers signers.json
  openfief plugin install nbp-fx --image IMAGE --config config.yaml
  openfief plugin approve nbp-fx
  openfief plugin status nbp-fx
  openfief plugin import ibkr-main statement.xml
  openfief plugin upgrade nbp-fx --image NEW-IMAGE
  openfief plugin revoke nbp-fx --yes
  openfief plugin uninstall nbp-fx --purge
  openfief plugin purge-data
  openfief plugin test IMAGE --signers signers.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newVerifyCommand(env),
		newInstallCommand(env),
		newUpgradeCommand(env),
		newApproveCommand(env),
		newRevokeCommand(env),
		newListCommand(env),
		newStatusCommand(env),
		newUninstallCommand(env),
		newPurgeDataCommand(env),
		newWaitCommand(env),
		newImportCommand(env),
		newPluginTestCommand(env),
	)
	return cmd
}
