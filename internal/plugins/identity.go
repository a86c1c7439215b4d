package plugins

import "strings"

// Namespace is where the operator runs every plugin and its own objects (D-15).
const Namespace = "openfief"

// serviceAccountPrefix starts every plugin's ServiceAccount name.
const serviceAccountPrefix = "plugin-"

// ServiceAccountName is the name of the ServiceAccount a plugin instance runs
// as: plugin-<name>. That ServiceAccount is the plugin's identity (D-27).
func ServiceAccountName(plugin string) string { return serviceAccountPrefix + plugin }

// ServiceAccountUsername is the Kubernetes username a plugin's tokens
// authenticate as: system:serviceaccount:openfief:plugin-<name>.
func ServiceAccountUsername(plugin string) string {
	return usernamePrefix + ServiceAccountName(plugin)
}

const usernamePrefix = "system:serviceaccount:" + Namespace + ":"

// PluginForServiceAccount maps an authenticated username back to the plugin
// it belongs to. It accepts only system:serviceaccount:openfief:plugin-<name>
// with a valid plugin name, so another namespace, a prefix trick such as
// "openfief-x", or the core's own ServiceAccount is never taken for a plugin
// (D-63).
func PluginForServiceAccount(username string) (string, bool) {
	sa, ok := strings.CutPrefix(username, usernamePrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutPrefix(sa, serviceAccountPrefix)
	if !ok || ValidateName(name) != nil {
		return "", false
	}
	return name, true
}
