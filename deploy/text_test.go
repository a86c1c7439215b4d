package deploy

import (
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestCRDPatternsRefuseUnsafeText (OF-17): the CRD patterns of the free-form
// strings a vendor writes (a mount path, an egress host, the image) refuse
// exactly the characters the domain refuses (plugins.IsUnsafeRune), compiled
// with Go's regexp as the API server compiles them; and the Secret names of
// a grant carry the DNS-subdomain pattern, which admits none of them.
func TestCRDPatternsRefuseUnsafeText(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		file, path     string
		prefix, suffix string
		// exact: the pattern admits every other character (the domain's
		// own checks refuse more of an egress host or an image).
		exact bool
	}{
		{"openfief.io_plugins.yaml", "spec.manifest.secrets[].mountPath", "/etc/a", "b", true},
		{"openfief.io_plugins.yaml", "status.deployed.manifest.secrets[].mountPath", "/etc/a", "b", true},
		{"openfief.io_plugins.yaml", "spec.manifest.egress[]", "a", "b.example", false},
		{"openfief.io_plugins.yaml", "spec.image", "r.example/a", "b" + digest, false},
		{"openfief.io_plugingrants.yaml", "spec.egress[]", "a", "b.example", false},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			re := regexp.MustCompile(patternAt(t, tc.file, tc.path))
			if !re.MatchString(tc.prefix + tc.suffix) {
				t.Fatalf("pattern %s refuses the plain value %q", re, tc.prefix+tc.suffix)
			}
			for r := rune(0); r <= 0x3000; r++ {
				v := tc.prefix + string(r) + tc.suffix
				switch got := re.MatchString(v); {
				case plugins.IsUnsafeRune(r) && got:
					t.Errorf("%U: pattern %s admits %q", r, re, v)
				case !plugins.IsUnsafeRune(r) && !got && tc.exact:
					t.Errorf("%U: pattern %s refuses %q, which the domain admits", r, re, v)
				}
			}
		})
	}
	for _, path := range []string{"spec.secrets[].name", "spec.secrets[].secretName"} {
		re := regexp.MustCompile(patternAt(t, "openfief.io_plugingrants.yaml", path))
		if !re.MatchString("creds.example") || re.MatchString("creds\x1b[2K") || re.MatchString("a\u202eb") {
			t.Errorf("%s: pattern %s is not a DNS subdomain's", path, re)
		}
	}
}

// patternAt returns the pattern of the schema at path (dotted, "[]" for a
// list's items) in the embedded CRD file.
func patternAt(t *testing.T, file, path string) string {
	t.Helper()
	raw, err := crds.ReadFile("crds/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, part := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(part, "[]")
		p, ok := s.Properties[name]
		if !ok {
			t.Fatalf("%s: no property %s", path, name)
		}
		s = &p
		if list {
			s = s.Items.Schema
		}
	}
	if s.Pattern == "" {
		t.Fatalf("%s: no pattern", path)
	}
	return s.Pattern
}
