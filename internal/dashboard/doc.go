// Package dashboard serves `openfief dashboard` (OF-9, OF-12): a page on
// 127.0.0.1 that shows each plugin's verification status (D-56), what its
// grant holds, what waits for the owner's approval and the command that
// approves it, kept live by watches of Plugins and PluginGrants and pushed to
// the browser as server-sent events.
//
// Given a CoreStatusFunc (the CLI's, with the owner's token), it also polls
// openfief-core's owner API, which has no watch, every few seconds: each
// plugin's page shows its syncs or exports and rows, and the pages list the
// data the core keeps of removed instances (OF-38) with the command that
// purges it. It never purges: deleting data stays a CLI action. A core that
// does not answer is one line on the page.
//
// It reads the cluster with the owner's own credentials and decides nothing
// itself: pending approval comes from plugins.NeedsApproval, signer kinds
// from plugins.TrustPolicy, the approve command from the CLI. It writes
// nothing unless given an ApproveFunc (the CLI's, behind --allow-approve):
// then each plugin's page can approve what is pending after the owner
// confirms it, for the versions the page showed. Every request
// must carry the run's random token; every asset is embedded, under a
// strict Content-Security-Policy.
//
// The server is the one renderer (OF-21): html/template renders the first
// page whole and, for each event, the page's live part again (the table,
// or a plugin's sections); the script only puts that markup in place, so
// everything a vendor wrote is escaped by the templates, once, in Go.
package dashboard
