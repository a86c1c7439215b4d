package operator

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// objectsFor builds the objects of a connector plugin "fx" whose manifest
// asks for resources and whose grant approves granted.
func objectsFor(t *testing.T, asked, granted plugins.Resources) Objects {
	t.Helper()
	p := plugins.Plugin{Name: "fx", Manifest: plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Resources: asked}}
	g := plugins.Grant{Name: "fx", Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Resources: granted}
	e, err := plugins.Effective(p, g)
	if err != nil {
		t.Fatal(err)
	}
	w, err := plugins.Compile(e, plugins.Topology{CoreAddress: "10.96.0.10:443", CorePodPort: 8443})
	if err != nil {
		t.Fatal(err)
	}
	plugin := &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: "fx", UID: "u-1"}}
	return BuildObjects(plugin, "registry.example/fx@sha256:"+digest64, nil, w, Cluster{CoreSelector: map[string]string{"app": "core"},
		Gate: IsolationGate{Image: testutil.GateImage, Settings: plugins.DefaultGateSettings()}})
}

const digest64 = "0000000000000000000000000000000000000000000000000000000000000001"

// TestBuildObjectsBoundsResources: every plugin container has memory, CPU and
// node-disk requests and limits, and a /tmp in memory of a bounded size; the
// defaults without a request, what the grant approves with one.
func TestBuildObjectsBoundsResources(t *testing.T) {
	q := resource.MustParse
	tests := map[string]struct {
		asked, granted plugins.Resources
		requests       corev1.ResourceList
		limits         corev1.ResourceList
		tmp            resource.Quantity
	}{
		"defaults": {
			requests: corev1.ResourceList{"memory": q("192Mi"), "cpu": q("50m"), "ephemeral-storage": q("16Mi")},
			limits:   corev1.ResourceList{"memory": q("192Mi"), "cpu": q("500m"), "ephemeral-storage": q("64Mi")},
			tmp:      q("64Mi"),
		},
		"asked and granted more": {
			asked:    plugins.Resources{Memory: "1Gi", CPU: "2", Tmp: "256Mi"},
			granted:  plugins.Resources{Memory: "1Gi", CPU: "2", Tmp: "256Mi"},
			requests: corev1.ResourceList{"memory": q("1280Mi"), "cpu": q("50m"), "ephemeral-storage": q("16Mi")},
			limits:   corev1.ResourceList{"memory": q("1280Mi"), "cpu": q("2"), "ephemeral-storage": q("64Mi")},
			tmp:      q("256Mi"),
		},
		"asked more, granted less: at most the grant": {
			asked:    plugins.Resources{Memory: "1Gi"},
			granted:  plugins.Resources{Memory: "512Mi"},
			requests: corev1.ResourceList{"memory": q("576Mi"), "cpu": q("50m"), "ephemeral-storage": q("16Mi")},
			limits:   corev1.ResourceList{"memory": q("576Mi"), "cpu": q("500m"), "ephemeral-storage": q("64Mi")},
			tmp:      q("64Mi"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := objectsFor(t, tc.asked, tc.granted)
			spec := o.Deployment.Spec.Template.Spec
			got := spec.Containers[0].Resources
			sameQuantities(t, "requests", tc.requests, got.Requests)
			sameQuantities(t, "limits", tc.limits, got.Limits)
			var tmp *corev1.Volume
			for i, v := range spec.Volumes {
				if v.Name == "tmp" {
					tmp = &spec.Volumes[i]
				}
			}
			if tmp == nil || tmp.EmptyDir == nil {
				t.Fatalf("no tmp emptyDir in %v", spec.Volumes)
			}
			if tmp.EmptyDir.Medium != corev1.StorageMediumMemory || tmp.EmptyDir.SizeLimit == nil || tmp.EmptyDir.SizeLimit.Cmp(tc.tmp) != 0 {
				t.Errorf("tmp emptyDir %+v, want in memory with sizeLimit %s", tmp.EmptyDir, tc.tmp.String())
			}
			// The memory limit holds the plugin's memory and a full /tmp.
			if lim := got.Limits.Memory(); lim.Value() < tmp.EmptyDir.SizeLimit.Value()+plugins.MinMemory {
				t.Errorf("memory limit %s leaves less than %d bytes beside a full /tmp", lim, plugins.MinMemory)
			}
		})
	}
}

func sameQuantities(t *testing.T, what string, want, got corev1.ResourceList) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s = %v, want %v", what, describeList(got), describeList(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g.Cmp(w) != 0 {
			t.Errorf("%s[%s] = %s, want %s", what, k, g.String(), w.String())
		}
	}
}

// TestBuildObjectsRunsAsNonZeroGroup: the plugin's process runs as a fixed
// non-root user and a non-zero group, whatever the image says, so an image
// without /etc/passwd never gets group 0; and nothing needs fsGroup.
func TestBuildObjectsRunsAsNonZeroGroup(t *testing.T) {
	spec := objectsFor(t, plugins.Resources{}, plugins.Resources{}).Deployment.Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsUser == nil || psc.RunAsGroup == nil || *psc.RunAsUser == 0 || *psc.RunAsGroup == 0 {
		t.Fatalf("pod securityContext %+v: want a non-zero runAsUser and runAsGroup", psc)
	}
	if *psc.RunAsUser != 65532 || *psc.RunAsGroup != 65532 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("runs as %d:%d, want 65532:65532 and runAsNonRoot", *psc.RunAsUser, *psc.RunAsGroup)
	}
	for _, g := range psc.SupplementalGroups {
		if g == 0 {
			t.Error("supplementary group 0")
		}
	}
	if psc.FSGroup != nil {
		t.Errorf("fsGroup %d set; no volume needs its ownership changed", *psc.FSGroup)
	}
	for _, c := range spec.Containers {
		if sc := c.SecurityContext; sc != nil && (sc.RunAsUser != nil && *sc.RunAsUser == 0 || sc.RunAsGroup != nil && *sc.RunAsGroup == 0) {
			t.Errorf("container %s overrides the ids with 0", c.Name)
		}
	}
}

// TestBuildObjectsDeterministic: the same input gives the same objects.
func TestBuildObjectsDeterministic(t *testing.T) {
	r := plugins.Resources{Memory: "512Mi", CPU: "1500m", Tmp: "128Mi"}
	a, b := objectsFor(t, r, r), objectsFor(t, r, r)
	if !reflect.DeepEqual(a.Deployment, b.Deployment) {
		t.Error("two builds of one workload differ")
	}
	sum1, err1 := specDigest(&a.Deployment.Spec.Template.Spec)
	sum2, err2 := specDigest(&b.Deployment.Spec.Template.Spec)
	if err1 != nil || err2 != nil || sum1 != sum2 {
		t.Errorf("digests %s, %s (%v, %v)", sum1, sum2, err1, err2)
	}
}

// describeList writes a resource list as "cpu=50m memory=192Mi".
func describeList(l corev1.ResourceList) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		v := l[k]
		out = append(out, string(k)+"="+v.String())
	}
	return strings.Join(out, " ")
}
