//go:build cluster

package cli

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestAPIServerRefusesUnsafeText (OF-17): the real API server, with the
// generated CRDs, refuses a Plugin whose mount path, egress host or image
// holds a control or bidi character (the issue-23 mount path among them)
// and a grant whose Secret names are not DNS subdomains, and admits the
// same objects with plain, non-ASCII text.
func TestAPIServerRefusesUnsafeText(t *testing.T) {
	k := newKube(t)
	ctx := context.Background()
	image := "registry.example/plugins/fx@sha256:" + strings.Repeat("ab", 32)
	plugin := func(name, img, host, mountPath string) *v1alpha1.Plugin {
		return &v1alpha1.Plugin{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace}, Spec: v1alpha1.PluginSpec{
			Image: img, Manifest: v1alpha1.Manifest{
				Capabilities: []v1alpha1.Capability{"connector"},
				Egress:       []v1alpha1.EgressHost{v1alpha1.EgressHost(host)},
				Secrets:      []v1alpha1.SecretMount{{Name: "creds", MountPath: mountPath}},
			}}}
	}
	refused := map[string]*v1alpha1.Plugin{
		"attack mount path": plugin("text-a", image, "exfil.example.com", attackPath),
		"RLO in mount path": plugin("text-b", image, "exfil.example.com", "/etc/a\u202eb"),
		"C1 in mount path":  plugin("text-c", image, "exfil.example.com", "/etc/a\u009bb"),
		"newline in host":   plugin("text-d", image, "exfil.example.com\nx", "/etc/a"),
		"bidi in host":      plugin("text-e", image, "exfil\u2066.example.com", "/etc/a"),
		"ESC in image":      plugin("text-f", "registry.example/\x1b[2Kfx@sha256:"+strings.Repeat("ab", 32), "exfil.example.com", "/etc/a"),
	}
	for name, p := range refused {
		if err := k.c.Create(ctx, p); !apierrors.IsInvalid(err) {
			t.Errorf("%s: create = %v, want Invalid", name, err)
		}
	}
	ok := plugin("text-ok", image, "exfil.example.com", "/etc/zażółć ☃")
	if err := k.c.Create(ctx, ok); err != nil {
		t.Fatalf("plain text refused: %v", err)
	}
	t.Cleanup(func() { _ = k.c.Delete(context.Background(), ok) })
	for name, sg := range map[string]v1alpha1.SecretGrant{
		"ESC in slot":   {Name: "creds\x1b[1A"},
		"RLO in Secret": {Name: "creds", SecretName: "other\u202e"},
	} {
		g := &v1alpha1.PluginGrant{ObjectMeta: metav1.ObjectMeta{Name: "text-g", Namespace: plugins.Namespace},
			Spec: v1alpha1.PluginGrantSpec{Secrets: []v1alpha1.SecretGrant{sg}}}
		if err := k.c.Create(ctx, g); !apierrors.IsInvalid(err) {
			t.Errorf("%s: create grant = %v, want Invalid", name, err)
		}
	}
}
