package operator

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// deployedOf is a record of image word with manifest m.
func deployedOf(word string, m v1alpha1.Manifest) *v1alpha1.DeployedVersion {
	return &v1alpha1.DeployedVersion{
		Image: "registry.example.com/p@" + testutil.Digest(word), Manifest: m,
		Signer: "ci", Trust: v1alpha1.ReasonSignedByTrustedSigner,
	}
}

func at(s int64) metav1.Time { return metav1.Time{Time: time.Unix(s, 0).UTC()} }

func TestNextHistory(t *testing.T) {
	connector := v1alpha1.Manifest{Capabilities: []v1alpha1.Capability{"connector"}}
	wider := v1alpha1.Manifest{Capabilities: []v1alpha1.Capability{"connector"}, Egress: []v1alpha1.EgressHost{"api.nbp.pl"}}
	a, b := deployedOf("a", connector), deployedOf("b", wider)
	digest := func(m v1alpha1.Manifest) string { return plugins.ManifestDigest(apiconv.ManifestFromAPI(m)) }
	revA1 := v1alpha1.PluginRevision{Revision: 1, Image: a.Image, ManifestDigest: digest(connector), Signer: "ci", Trust: v1alpha1.ReasonSignedByTrustedSigner, FirstRan: at(10)}
	revB2 := v1alpha1.PluginRevision{Revision: 2, Image: b.Image, ManifestDigest: digest(wider), Signer: "ci", Trust: v1alpha1.ReasonSignedByTrustedSigner, FirstRan: at(20)}
	replaced := func(r v1alpha1.PluginRevision, s int64) v1alpha1.PluginRevision {
		r.LastRan = &metav1.Time{Time: time.Unix(s, 0).UTC()}
		return r
	}
	withConfig := a.DeepCopy()
	withConfig.Config = &apiextensionsv1.JSON{Raw: []byte(`{"currency":"PLN"}`)}
	withConfig.VerifiedAt = &metav1.Time{Time: time.Unix(99, 0)}
	stamped := b.DeepCopy()
	stamped.VerifiedAt = &metav1.Time{Time: time.Unix(18, 0)}

	tests := map[string]struct {
		old      []v1alpha1.PluginRevision
		deployed *v1alpha1.DeployedVersion
		now      int64
		want     []v1alpha1.PluginRevision
	}{
		"nothing ran, nothing runs":  {},
		"the first version starts":   {deployed: a, now: 10, want: []v1alpha1.PluginRevision{revA1}},
		"the same image keeps going": {old: []v1alpha1.PluginRevision{revA1}, deployed: a, now: 15, want: []v1alpha1.PluginRevision{revA1}},
		"a new record of the same image (config, re-verified)": {
			old: []v1alpha1.PluginRevision{revA1}, deployed: withConfig, now: 15, want: []v1alpha1.PluginRevision{revA1},
		},
		"nothing runs any more keeps the history": {old: []v1alpha1.PluginRevision{revA1}, now: 15, want: []v1alpha1.PluginRevision{revA1}},
		"an upgrade records a revision and ends the last": {
			old: []v1alpha1.PluginRevision{revA1}, deployed: b, now: 20,
			want: []v1alpha1.PluginRevision{revB2, replaced(revA1, 20)},
		},
		"the record's verifiedAt dates the revision": {
			old: []v1alpha1.PluginRevision{revA1}, deployed: stamped, now: 20,
			want: []v1alpha1.PluginRevision{func() v1alpha1.PluginRevision { r := revB2; r.FirstRan = at(18); return r }(), replaced(revA1, 18)},
		},
		"a rollback records a new revision of the old image": {
			old: []v1alpha1.PluginRevision{revB2, replaced(revA1, 20)}, deployed: a, now: 30,
			want: []v1alpha1.PluginRevision{
				{Revision: 3, Image: a.Image, ManifestDigest: digest(connector), Signer: "ci", Trust: v1alpha1.ReasonSignedByTrustedSigner, FirstRan: at(30)},
				replaced(revB2, 30), replaced(revA1, 20),
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			before := fmt.Sprint(tt.old)
			got := nextHistory(tt.old, tt.deployed, time.Unix(tt.now, 0))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			if fmt.Sprint(tt.old) != before {
				t.Errorf("nextHistory changed its input: %s, was %s", fmt.Sprint(tt.old), before)
			}
		})
	}
}

// TestNextHistoryIsBounded runs twenty upgrades, rolling back every third,
// and checks after each that the history is at most MaxPluginHistory long,
// newest first with strictly falling revision numbers, every revision but
// the newest ended, and the newest the image that runs.
func TestNextHistoryIsBounded(t *testing.T) {
	var h []v1alpha1.PluginRevision
	images := []*v1alpha1.DeployedVersion{}
	for i := range 20 {
		d := deployedOf(fmt.Sprintf("v%d", i), v1alpha1.Manifest{Capabilities: []v1alpha1.Capability{"connector"}})
		if i%3 == 2 {
			d = images[len(images)-2] // back to the one before
		}
		images = append(images, d)
		h = nextHistory(h, d, time.Unix(int64(100+i), 0))
		if len(h) > v1alpha1.MaxPluginHistory {
			t.Fatalf("step %d: %d revisions, want at most %d", i, len(h), v1alpha1.MaxPluginHistory)
		}
		if h[0].Image != d.Image || h[0].LastRan != nil {
			t.Fatalf("step %d: newest %+v, want %s still running", i, h[0], d.Image)
		}
		for j := 1; j < len(h); j++ {
			if h[j].Revision >= h[j-1].Revision || h[j].LastRan == nil {
				t.Fatalf("step %d: revision %d after %d, lastRan %v", i, h[j].Revision, h[j-1].Revision, h[j].LastRan)
			}
		}
	}
	if h[0].Revision != 20 {
		t.Errorf("newest revision %d after 20 changes, want 20", h[0].Revision)
	}
	long := append(append([]v1alpha1.PluginRevision{}, h...), h...)
	if got := nextHistory(long, images[len(images)-1], time.Unix(500, 0)); len(got) != v1alpha1.MaxPluginHistory {
		t.Errorf("a history of %d read back gives %d revisions, want %d", len(long), len(got), v1alpha1.MaxPluginHistory)
	}
}
