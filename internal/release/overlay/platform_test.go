package overlay

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/images"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestPlatformOverlay writes a whole-platform overlay with every option and
// renders it: the CRDs and the admission policy are in it, every object
// carries the version (no pod template does), the operator mounts the
// registry config, both API server rules of the core's NetworkPolicy
// name the given addresses instead of the placeholder, and the ConfigMap
// openfief-release names the check probe (OF-29), which no container runs.
func TestPlatformOverlay(t *testing.T) {
	root, err := images.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	refs := testRefs(t)
	out := filepath.Join(t.TempDir(), "platform")
	err = WritePlatform(out, filepath.Join(root, "deploy"), Platform{
		Refs: refs, Version: "v1.2.3", RegistryConfig: true,
		APIServerCIDRs: []string{"10.0.0.9", "fd00::1", "10.0.0.2/32", "10.0.0.9/32"},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Render(out)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		if got := u.GetLabels()["app.kubernetes.io/version"]; got != "v1.2.3" {
			t.Errorf("%s %s: version label %q, want v1.2.3", u.GetKind(), u.GetName(), got)
		}
		if tpl, ok, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels"); ok {
			if _, has := tpl["app.kubernetes.io/version"]; has {
				t.Errorf("%s %s: the pod template carries the version label", u.GetKind(), u.GetName())
			}
		}
		switch {
		case u.GetKind() == "Deployment" && u.GetName() == "openfief-operator":
			args, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if !strings.Contains(strings.Join(fmtSlice(args), " "), "--registry-config=/etc/openfief/registry/config.json") {
				t.Errorf("the operator does not read the registry config: %v", args)
			}
		case u.GetKind() == "ConfigMap" && u.GetName() == deploy.ReleaseConfigMap:
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			if want := map[string]string{deploy.ReleaseKeyCheckProbe: refs[CheckProbe].String()}; !maps.Equal(data, want) || u.GetNamespace() != plugins.Namespace {
				t.Errorf("ConfigMap %s/%s: data %v, want %v", u.GetNamespace(), u.GetName(), data, want)
			}
			kinds["release"]++
		case u.GetKind() == "NetworkPolicy" && u.GetName() == deploy.CoreNetworkPolicy:
			ingress, _, _ := unstructured.NestedSlice(u.Object, "spec", "ingress")
			egress, _, _ := unstructured.NestedSlice(u.Object, "spec", "egress")
			want := "[map[ipBlock:map[cidr:10.0.0.2/32]] map[ipBlock:map[cidr:10.0.0.9/32]] map[ipBlock:map[cidr:fd00::1/128]]]"
			if got := fmtSlice(ingress)[1]; !strings.Contains(got, "from:"+want) {
				t.Errorf("owner-port rule %s, want peers %s", got, want)
			}
			if got := fmtSlice(egress)[2]; !strings.Contains(got, "to:"+want) {
				t.Errorf("API server egress rule %s, want peers %s", got, want)
			}
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Deployment", "PersistentVolumeClaim"} {
		if kinds[k] == 0 {
			t.Errorf("the overlay renders no %s: %v", k, kinds)
		}
	}
	if kinds["Deployment"] != 3 || kinds["release"] != 1 {
		t.Errorf("%d Deployments, want 3; %d ConfigMaps %s, want 1", kinds["Deployment"], kinds["release"], deploy.ReleaseConfigMap)
	}
	imgs, err := RenderedImages(out)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(imgs)
	if want := []string{refs["egress-proxy"].String(), refs["openfief-core"].String(), refs["operator"].String()}; !slices.Equal(imgs, want) {
		t.Errorf("images %v, want %v", imgs, want)
	}

	for name, r := range map[string]Platform{
		"no version":        {Refs: refs},
		"bad version":       {Refs: refs, Version: "v1 2"},
		"open API server":   {Refs: refs, Version: "v1", APIServerCIDRs: []string{"0.0.0.0/0"}},
		"not an address":    {Refs: refs, Version: "v1", APIServerCIDRs: []string{"api.example.com"}},
		"no proxy's digest": {Refs: map[string]plugins.ImageRef{"operator": refs["operator"], "openfief-core": refs["openfief-core"]}, Version: "v1"},
	} {
		if err := WritePlatform(filepath.Join(t.TempDir(), "x"), filepath.Join(root, "deploy"), r); err == nil {
			t.Errorf("%s: an overlay was written", name)
		}
	}

	// Without the probe's digest, no ConfigMap names one.
	delete(refs, CheckProbe)
	out = filepath.Join(t.TempDir(), "no-probe")
	if err := WritePlatform(out, filepath.Join(root, "deploy"), Platform{Refs: refs, Version: "v1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if objs, err = deploy.Render(out); err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetName() == deploy.ReleaseConfigMap {
			t.Errorf("an overlay without the probe's digest holds %s %s", u.GetKind(), u.GetName())
		}
	}
}

// testRefs are digests of the three platform images and the check probe.
func testRefs(t *testing.T) map[string]plugins.ImageRef {
	t.Helper()
	refs := map[string]plugins.ImageRef{}
	for i, n := range []string{"operator", "egress-proxy", "openfief-core", CheckProbe} {
		ref, err := plugins.ParseImageRef("registry.example.com:5000/openfief/" + n + "@sha256:" + strings.Repeat(string(rune('a'+i)), 64))
		if err != nil {
			t.Fatal(err)
		}
		refs[n] = ref
	}
	return refs
}

// fmtSlice prints each element of a JSON list.
func fmtSlice(l []any) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = fmt.Sprint(v)
	}
	return out
}
