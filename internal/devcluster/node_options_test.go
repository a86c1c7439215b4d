//go:build cluster

package devcluster_test

import (
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/devcluster"
)

// TestRealNodeOnlyOptionsRefused gives Start the cluster DNS and pre-made
// volumes without a real node, and a negative number of volumes: each is
// refused, naming what is wrong, before anything starts.
func TestRealNodeOnlyOptionsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		opts devcluster.Options
		want string
	}{
		"dns on kwok":      {devcluster.Options{Mode: devcluster.Full, ClusterDNS: true}, "ClusterDNS needs a real node"},
		"dns minimal":      {devcluster.Options{ClusterDNS: true}, "ClusterDNS needs a real node"},
		"volumes on kwok":  {devcluster.Options{Mode: devcluster.Full, Volumes: 1}, "Volumes needs a real node"},
		"negative volumes": {devcluster.Options{Mode: devcluster.Full, Node: devcluster.NodeReal, Volumes: -1}, "must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := devcluster.Start(t.Context(), tc.opts)
			if err == nil {
				_ = c.Stop() // the test fails either way
				t.Fatal("Start accepted the options")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v; want an error saying %q", err, tc.want)
			}
		})
	}
}
