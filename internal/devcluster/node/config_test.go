package node

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestKubeletConfigLimitsPods: the real node's kubelet caps every pod's
// processes (podPidsLimit), so a plugin's fork bomb stops at PodPidsLimit.
func TestKubeletConfigLimitsPods(t *testing.T) {
	out := kubeletConfigYAML(nodeLayout{}, nodeNet{}, 10250, "/ca.crt", "/openfief")
	var conf struct {
		Kind         string `json:"kind"`
		PodPidsLimit *int64 `json:"podPidsLimit"`
	}
	if err := yaml.Unmarshal([]byte(out), &conf); err != nil {
		t.Fatalf("the kubelet configuration is not YAML: %v\n%s", err, out)
	}
	if conf.Kind != "KubeletConfiguration" || conf.PodPidsLimit == nil || *conf.PodPidsLimit != PodPidsLimit || PodPidsLimit <= 0 {
		t.Errorf("podPidsLimit %v, want %d:\n%s", conf.PodPidsLimit, PodPidsLimit, out)
	}
	if strings.Count(out, "podPidsLimit") != 1 {
		t.Error("podPidsLimit set more than once")
	}
}
