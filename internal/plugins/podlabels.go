package plugins

// The labels the operator puts on every plugin pod (and its Deployment,
// Service and NetworkPolicy selectors). The operator refuses a core or
// proxy selector that these labels could satisfy (D-59).
const (
	// LabelName is the app.kubernetes.io/name label; its value on plugin
	// pods is ValuePluginName.
	LabelName = "app.kubernetes.io/name"
	// LabelComponent is the app.kubernetes.io/component label; its value on
	// plugin pods is ValueComponentPlugin.
	LabelComponent = "app.kubernetes.io/component"
	// LabelManagedBy is the app.kubernetes.io/managed-by label; its value on
	// plugin pods is ValueManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelPluginName names the plugin instance a pod belongs to.
	LabelPluginName = "openfief.io/plugin"

	// ValuePluginName is LabelName's value on plugin pods.
	ValuePluginName = "openfief-plugin"
	// ValueComponentPlugin is LabelComponent's value on plugin pods.
	ValueComponentPlugin = "plugin"
	// ValueManagedBy is LabelManagedBy's value on everything the operator
	// creates.
	ValueManagedBy = "openfief-operator"
)

// LabelCheckRun marks the Plugins and PluginGrants `openfief check
// --isolation` creates, with its run's id (OF-29): the check deletes only
// objects that carry it, and the core never calls a Plugin that carries it,
// neither Sync nor a view's pages. Anyone who may label a Plugin can only
// take calls away with it.
const LabelCheckRun = "openfief.io/check-run"
