package testutil

import (
	"slices"
	"testing"
)

// TestMetricNames: the names an expression selects, whatever the
// functions, aggregations, matchers, ranges, groupings and numbers around
// them.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`up`: {"up"},
		`time() - openfief_core_sync_last_success_timestamp_seconds > 2 * openfief_core_sync_interval_seconds`: {
			"openfief_core_sync_interval_seconds", "openfief_core_sync_last_success_timestamp_seconds"},
		`max by (instance) (openfief_core_view_lag_entries{job="x", instance=~"a.*"}[5m] offset 1h) > 1e3`: {"openfief_core_view_lag_entries"},
		`kubelet_volume_stats_available_bytes{persistentvolumeclaim="openfief-core-data"} / on (namespace, persistentvolumeclaim) group_left kubelet_volume_stats_capacity_bytes < 0.1`: {
			"kubelet_volume_stats_available_bytes", "kubelet_volume_stats_capacity_bytes"},
		`sum without (reason) (rate(openfief_core_syncs_total{reason!="succeeded"}[1h])) and on (instance) openfief_core_sync_failing == 1 unless absent(up)`: {
			"openfief_core_sync_failing", "openfief_core_syncs_total", "up"},
		`label_replace(foo, "dst", "$1 bar and baz", "src", "(.*)") or vector(0)`: {"foo"},
		`histogram_quantile(0.99, sum by (le) (rate(openfief_core_plugin_call_duration_seconds_bucket[5m])))`: {
			"openfief_core_plugin_call_duration_seconds_bucket"},
	} {
		if got := MetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("MetricNames(%s) = %v, want %v", expr, got, want)
		}
	}
}
