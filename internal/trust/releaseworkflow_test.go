package trust

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// workflowStep is one step of the release workflow's job, in order.
type workflowStep struct {
	Name string
	Run  string
	Env  map[string]string
}

// loadReleaseWorkflow reads the release workflow and returns its one job's
// steps, the ref its guard admits and the repository (owner/name) go.mod
// names.
func loadReleaseWorkflow(t *testing.T) (steps []workflowStep, ref, repo string) {
	t.Helper()
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "images.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf releaseWorkflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	repo, _ = strings.CutPrefix(modfile.ModulePath(gomod), "github.com/")
	if len(wf.Jobs) != 1 {
		t.Fatalf("jobs %v, want one", keys(wf.Jobs))
	}
	for _, job := range wf.Jobs {
		ref = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(job.If), "github.ref == '"), "'")
		for _, s := range job.Steps {
			steps = append(steps, workflowStep{Name: s.Name, Run: s.Run, Env: s.Env})
		}
	}
	return steps, ref, repo
}

// stepIndex is the index of the first step whose script matches re, or -1.
func stepIndex(steps []workflowStep, re string) int {
	m := regexp.MustCompile(re)
	for i, s := range steps {
		if m.MatchString(s.Run) {
			return i
		}
	}
	return -1
}

// TestReleaseWorkflowProvenanceNamesIt: the release workflow passes
// BUILDER_ID to make release, and what GitHub expands it to is the
// workflow's own URI, the subject its signatures carry, as docs/images.md
// says; the Makefile hands it to hack/release as --builder-id. Without it the
// provenance would name a developer's machine.
func TestReleaseWorkflowProvenanceNamesIt(t *testing.T) {
	steps, ref, repo := loadReleaseWorkflow(t)
	const path = ".github/workflows/images.yml"
	i := stepIndex(steps, `(^|\n)\s*make release `)
	if i < 0 {
		t.Fatal("no step runs make release")
	}
	step := steps[i]
	if !strings.Contains(step.Run, `BUILDER_ID="${BUILDER_ID}"`) {
		t.Errorf("make release is run without BUILDER_ID=\"${BUILDER_ID}\": %q", step.Run)
	}
	// What GitHub puts in the expressions of this job's env.
	expand := strings.NewReplacer(
		"${{ github.workflow_ref }}", repo+"/"+path+"@"+ref,
		"${{ github.repository }}", repo,
		"${{ github.ref }}", ref,
	)
	id := expand.Replace(step.Env["BUILDER_ID"])
	if strings.Contains(id, "${{") || id != plugins.OpenFiefCISubject {
		t.Errorf("BUILDER_ID %q expands to %q, want the workflow's URI %q", step.Env["BUILDER_ID"], id, plugins.OpenFiefCISubject)
	}

	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "images.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("BUILDER_ID="+plugins.OpenFiefCISubject)) {
		t.Errorf("docs/images.md does not say the release workflow passes BUILDER_ID=%s", plugins.OpenFiefCISubject)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\t.*hack/release make .*\$\(if \$\(BUILDER_ID\),--builder-id "\$\(BUILDER_ID\)"\)`).Match(mk) {
		t.Error("the Makefile's release recipe does not pass BUILDER_ID as --builder-id")
	}
}

// TestReleaseWorkflowPublishesLast: nothing looks released before
// everything is. The images are pushed by digest only, the GitHub release
// is created as a draft with its files, then published (which makes the
// tag), and only then are the images tagged with the version.
func TestReleaseWorkflowPublishesLast(t *testing.T) {
	steps, _, _ := loadReleaseWorkflow(t)
	order := []struct{ what, re string }{
		{"refuse an existing tag", `/git/ref/tags/`},
		{"make release, untagged", `(^|\n)\s*make release .*UNTAGGED=1`},
		{"create the release as a draft", `gh release create .*--draft`},
		{"publish it", `gh release edit .*--draft=false`},
		{"tag the images", `(^|\n)\s*make release-tag `},
	}
	last := -1
	for _, o := range order {
		i := stepIndex(steps, o.re)
		if i < 0 {
			t.Errorf("no step does %q (a script matching %s)", o.what, o.re)
			continue
		}
		if i <= last {
			t.Errorf("step %q (%d) runs before the one before it in the order (%d)", o.what, i, last)
		}
		last = i
	}
	for _, s := range steps {
		if strings.Contains(s.Run, "gh release create") && !strings.Contains(s.Run, "--draft") {
			t.Errorf("step %q publishes the release at once", s.Name)
		}
	}
}

// TestReleaseWorkflowRefusesAnExistingTag runs the workflow's tag check with
// a stand-in for curl that answers each status GitHub may give: only a 404
// lets the release go on; a 200 (the tag exists), a server error, a
// redirect and no answer at all stop it. The token reaches curl on its
// standard input, never on its command line.
func TestReleaseWorkflowRefusesAnExistingTag(t *testing.T) {
	steps, _, _ := loadReleaseWorkflow(t)
	i := stepIndex(steps, `/git/ref/tags/`)
	if i < 0 {
		t.Fatal("no step checks the tag")
	}
	step := steps[i]
	script := filepath.Join(t.TempDir(), "step.sh")
	if err := os.WriteFile(script, []byte(step.Run), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	// The stand-in: records its arguments and standard input, prints the
	// status of FAKE_STATUS and exits with FAKE_EXIT, as curl --write-out
	// '%{http_code}' does (000 when nothing answered).
	fake := `#!/bin/sh
printf '%s\n' "$@" > "$FAKE_LOG.args"
cat > "$FAKE_LOG.stdin"
printf '%s' "$FAKE_STATUS"
exit "$FAKE_EXIT"
`
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	const token = "ghs_not-a-real-token"
	for name, tc := range map[string]struct {
		status, exit string
		ok           bool
	}{
		"no such tag":    {"404", "0", true},
		"the tag exists": {"200", "0", false},
		"server error":   {"500", "0", false},
		"rate limited":   {"403", "0", false},
		"a redirect":     {"301", "0", false},
		"no answer":      {"000", "6", false},
	} {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "curl")
			// As GitHub runs a bash step.
			cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", script)
			cmd.Env = []string{
				"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
				"GH_TOKEN=" + token, "VERSION=v1.2.0",
				"GITHUB_API_URL=https://api.github.com", "GITHUB_REPOSITORY=arkadiuss/openfief",
				"FAKE_LOG=" + log, "FAKE_STATUS=" + tc.status, "FAKE_EXIT=" + tc.exit,
			}
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ok {
				t.Errorf("HTTP %s (curl exit %s): step error %v, want success %v\n%s", tc.status, tc.exit, err, tc.ok, out)
			}
			args, _ := os.ReadFile(log + ".args")
			stdin, _ := os.ReadFile(log + ".stdin")
			if bytes.Contains(args, []byte(token)) {
				t.Error("the token is on curl's command line")
			}
			if !bytes.Contains(stdin, []byte("Authorization: Bearer "+token)) {
				t.Errorf("curl's standard input %q holds no Authorization header", stdin)
			}
			if !bytes.Contains(args, []byte("https://api.github.com/repos/arkadiuss/openfief/git/ref/tags/v1.2.0")) {
				t.Errorf("curl asked for %q", args)
			}
		})
	}
}
