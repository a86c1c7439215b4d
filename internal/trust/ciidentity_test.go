package trust

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
	"github.com/arkadiuss/openfief/internal/trust/cosign/cosigntest"
)

// TestOpenFiefCIIdentityIsExact signs images with real keyless bundles from
// one virtual Sigstore as OpenFief's CI and as its near misses, and checks
// them through the real verifier against a policy that trusts only
// OpenFiefCI(): the release workflow on main is admitted, every other
// workflow, ref, fork or issuer is an untrusted signer.
func TestOpenFiefCIIdentityIsExact(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	const repo = "https://github.com/arkadiuss/openfief/.github/workflows/"
	as := func(issuer, subject string) *cosigntest.Keyless {
		return &cosigntest.Keyless{VS: vs, Issuer: issuer, Subject: subject}
	}
	reg := cosigntest.NewRegistry(t, true)
	manifest := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}}
	images, err := cosign.NewVerifier(cosign.WithTrustedMaterial(vs), cosign.WithSCTRequired(false))
	if err != nil {
		t.Fatal(err)
	}
	v := NewPolicyVerifier(images, ciPolicy(t))

	ci := reg.PushImage(t, "openfief/nbp-fx", cosigntest.ManifestLabel(t, manifest))
	reg.Sign(t, ci, as(plugins.GitHubActionsIssuer, plugins.OpenFiefCISubject))
	if got := v.Check(context.Background(), ci, &manifest); !got.Verified() || got.Signer != plugins.OpenFiefCI().Name {
		t.Fatalf("signed by images.yml on main: %+v, want verified by %s", got, plugins.OpenFiefCI().Name)
	}

	nearMisses := map[string]*cosigntest.Keyless{
		"another workflow":       as(plugins.GitHubActionsIssuer, repo+"release.yml@refs/heads/main"),
		"images.yaml":            as(plugins.GitHubActionsIssuer, repo+"images.yaml@refs/heads/main"),
		"another branch":         as(plugins.GitHubActionsIssuer, repo+"images.yml@refs/heads/dev"),
		"a branch named main-x":  as(plugins.GitHubActionsIssuer, repo+"images.yml@refs/heads/main-x"),
		"a tag":                  as(plugins.GitHubActionsIssuer, repo+"images.yml@refs/tags/v1.0.0"),
		"a pull request":         as(plugins.GitHubActionsIssuer, repo+"images.yml@refs/pull/1/merge"),
		"a fork":                 as(plugins.GitHubActionsIssuer, "https://github.com/someone/openfief/.github/workflows/images.yml@refs/heads/main"),
		"an owner of other case": as(plugins.GitHubActionsIssuer, "https://github.com/Arkadiuss/openfief/.github/workflows/images.yml@refs/heads/main"),
		"a trailing slash":       as(plugins.GitHubActionsIssuer, plugins.OpenFiefCISubject+"/"),
		"a look-alike issuer":    as("https://token.actions.githubusercontent.com.example.com", plugins.OpenFiefCISubject),
		"an issuer with a slash": as(plugins.GitHubActionsIssuer+"/", plugins.OpenFiefCISubject),
		"an http issuer":         as(strings.Replace(plugins.GitHubActionsIssuer, "https:", "http:", 1), plugins.OpenFiefCISubject),
		"GitHub Enterprise":      as("https://token.actions.githubusercontent.com/enterprise", plugins.OpenFiefCISubject),
	}
	for name, signer := range nearMisses {
		t.Run(name, func(t *testing.T) {
			ref := reg.PushImage(t, "openfief/nbp-fx", cosigntest.ManifestLabel(t, manifest))
			reg.Sign(t, ref, signer)
			got := v.Check(context.Background(), ref, &manifest)
			if got.Status != metav1.ConditionFalse || got.Reason != v1alpha1.ReasonUntrustedSigner {
				t.Errorf("signed as issuer %q subject %q: %+v, want %s", signer.Issuer, signer.Subject, got, v1alpha1.ReasonUntrustedSigner)
			}
		})
	}
}

// releaseWorkflow is the part of a GitHub Actions workflow that decides the
// identity its keyless signatures carry.
type releaseWorkflow struct {
	On          map[string]any `yaml:"on"`
	Permissions map[string]any `yaml:"permissions"`
	Jobs        map[string]struct {
		If          string            `yaml:"if"`
		Permissions map[string]string `yaml:"permissions"`
		Steps       []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// TestReleaseWorkflowSignsAsOpenFiefCI reads the release workflow and checks
// that what GitHub puts in its certificates' subject (the repository, the
// workflow file's path and the ref the guard admits) is exactly
// OpenFiefCISubject, that it runs only when dispatched, and that its one job
// asks for an OIDC token: renaming the file, dropping or loosening the ref
// guard, adding a trigger or losing id-token: write fails here.
func TestReleaseWorkflowSignsAsOpenFiefCI(t *testing.T) {
	root := filepath.Join("..", "..")
	const path = ".github/workflows/images.yml"
	raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatalf("the release workflow: %v", err)
	}
	var wf releaseWorkflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := modfile.ModulePath(gomod)
	repo, ok := strings.CutPrefix(module, "github.com/")
	if !ok {
		t.Fatalf("module %q is not on github.com", module)
	}

	if len(wf.On) != 1 || wf.On["workflow_dispatch"] == nil {
		t.Errorf("%s triggers on %v, want only workflow_dispatch (a push, tag or pull request would sign as another ref)", path, keys(wf.On))
	}
	if len(wf.Permissions) != 0 {
		t.Errorf("%s grants %v to every job, want permissions: {} at the top", path, wf.Permissions)
	}
	if len(wf.Jobs) != 1 {
		t.Fatalf("%s has jobs %v, want exactly one", path, keys(wf.Jobs))
	}
	for name, job := range wf.Jobs {
		ref, ok := strings.CutPrefix(strings.TrimSpace(job.If), "github.ref == '")
		ref, closed := strings.CutSuffix(ref, "'")
		if !ok || !closed || strings.ContainsAny(ref, "'|&!") {
			t.Fatalf("job %s: if %q, want exactly github.ref == '<ref>'", name, job.If)
		}
		subject := "https://github.com/" + repo + "/" + path + "@" + ref
		if subject != plugins.OpenFiefCISubject {
			t.Errorf("job %s signs as %q, the operator trusts %q", name, subject, plugins.OpenFiefCISubject)
		}
		if job.Permissions["id-token"] != "write" {
			t.Errorf("job %s: id-token %q, want write (keyless signing needs the OIDC token)", name, job.Permissions["id-token"])
		}
		for scope, level := range job.Permissions {
			if level != "read" && level != "none" && scope != "contents" && scope != "packages" && scope != "id-token" {
				t.Errorf("job %s: %s: %s is more than a release needs", name, scope, level)
			}
		}
		keyless := false
		for _, step := range job.Steps {
			if step.Uses != "" && !pinnedAction(step.Uses) {
				t.Errorf("job %s: %q is not pinned by a full commit SHA", name, step.Uses)
			}
			if strings.Contains(step.Run, "${{") {
				t.Errorf("job %s: a run script interpolates an expression (use env): %q", name, step.Run)
			}
			keyless = keyless || strings.Contains(step.Run, "make release") && strings.Contains(step.Run, "SIGN=keyless")
		}
		if !keyless {
			t.Errorf("job %s never runs make release with SIGN=keyless", name)
		}
	}
}

// pinnedAction reports whether uses names an action at a 40-hex commit.
func pinnedAction(uses string) bool {
	_, sha, ok := strings.Cut(uses, "@")
	if !ok || len(sha) != 40 {
		return false
	}
	return strings.Trim(sha, "0123456789abcdef") == ""
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
