package operator

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// pluginConditionDesc is the operator's own metric beside controller-
// runtime's (docs/operations.md#metrics): one series of value 1 per Plugin
// and condition, labelled with the condition's status and reason, as
// kube-state-metrics does for pods. The alerts on a plugin waiting for
// approval and on an image refused read it.
var pluginConditionDesc = prometheus.NewDesc("openfief_operator_plugin_condition",
	"1 for each condition of each Plugin (Ready, SignatureVerified, ApprovalRequired), labelled with its status and reason.",
	[]string{"plugin", "type", "status", "reason"}, nil)

// ReasonOther stands, in the reason label, for a reason the operator does
// not write: a condition written by someone else, so that the label keeps
// to a fixed set.
const ReasonOther = "Other"

// conditionReasons are the reasons the operator writes, by condition type:
// the values the reason label takes besides ReasonOther.
var conditionReasons = map[string][]string{
	v1alpha1.ConditionReady: {
		v1alpha1.ReasonRunning, v1alpha1.ReasonRunningPreviousVersion, v1alpha1.ReasonProgressing,
		v1alpha1.ReasonNoGrant, v1alpha1.ReasonInvalidGrant, v1alpha1.ReasonInvalidPreviousVersion,
		v1alpha1.ReasonClusterUnavailable, v1alpha1.ReasonAwaitingApproval, v1alpha1.ReasonNothingGranted,
		v1alpha1.ReasonInvalidSpec, v1alpha1.ReasonInvalidConfig, v1alpha1.ReasonSignatureNotVerified,
	},
	v1alpha1.ConditionSignatureVerified: {
		v1alpha1.ReasonVerified, v1alpha1.ReasonSignedByTrustedSigner, v1alpha1.ReasonUnsigned,
		v1alpha1.ReasonUntrustedSigner, v1alpha1.ReasonManifestMismatch, v1alpha1.ReasonInvalidImage,
		v1alpha1.ReasonRegistryUnavailable, v1alpha1.ReasonRegistryUnauthorized,
	},
	v1alpha1.ConditionApprovalRequired: {v1alpha1.ReasonPermissionsPending, v1alpha1.ReasonNothingPending},
}

// conditionStatuses are the values of the status label.
var conditionStatuses = []string{"True", "False", "Unknown"}

// pluginCollector reads the Plugins of openfief from the manager's cache at
// each scrape, without copying them (it only reads): nothing to keep in
// step, and a Plugin that is gone leaves no series.
type pluginCollector struct {
	reader client.Reader
}

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pluginConditionDesc }

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list v1alpha1.PluginList
	// Read in place, not copied: a copy of every Plugin at each scrape
	// was tens of MB at 10,000 Plugins, the operator's memory peak.
	if err := c.reader.List(ctx, &list, client.InNamespace(plugins.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		// The cache not started yet: no series rather than a failed
		// scrape, which would drop controller-runtime's metrics too.
		return
	}
	for i := range list.Items {
		p := &list.Items[i]
		for _, cond := range p.Status.Conditions {
			reasons, ok := conditionReasons[cond.Type]
			if !ok {
				continue
			}
			reason := cond.Reason
			if !slices.Contains(reasons, reason) {
				reason = ReasonOther
			}
			status := string(cond.Status)
			if !slices.Contains(conditionStatuses, status) {
				status = "Unknown"
			}
			ch <- prometheus.MustNewConstMetric(pluginConditionDesc, prometheus.GaugeValue, 1, p.Name, cond.Type, status, reason)
		}
	}
}

// registered is the collector in controller-runtime's registry, replaced
// when another manager of the same process (the tests') adds its own.
var (
	registeredMu sync.Mutex
	registered   *pluginCollector
)

// registerPluginMetrics serves the Plugins' conditions, read through r, on
// the manager's metrics endpoint (controller-runtime's registry).
func registerPluginMetrics(r client.Reader) error {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	if registered != nil {
		crmetrics.Registry.Unregister(registered)
	}
	c := &pluginCollector{reader: r}
	if err := crmetrics.Registry.Register(c); err != nil {
		return err
	}
	registered = c
	return nil
}
