// Package dashboard serves `openfief dashboard` (OF-9, OF-12): a page on
// 127.0.0.1 that shows each plugin's verification status (D-56), what its
// grant holds, what waits for the owner's approval and the command that
// approves it, kept live by watches of Plugins and PluginGrants and pushed to
// the browser as server-sent events.
//
// It reads the cluster with the owner's own credentials and decides nothing
// itself: pending approval comes from plugins.NeedsApproval, signer kinds
// from plugins.TrustPolicy, the approve command from the CLI. It writes
// nothing unless given an ApproveFunc (the CLI's, behind --allow-approve):
// then each plugin's page can approve what is pending after the owner
// confirms it, for the versions the page showed. Every request
// must carry the run's random token; everything a vendor wrote is rendered
// as text (html/template on the server, textContent in the browser) under a
// strict Content-Security-Policy, and every asset is embedded.
package dashboard
