package harness

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
)

func TestReportTextAndJSON(t *testing.T) {
	rep := Report{Image: "registry.test/p@sha256:00", Checks: []Result{
		{Name: CheckLabel, Status: Skip, Reason: "signature not checked"},
		{Name: CheckServes, Status: Fail, Reason: "exited\x1b[31m red"},
	}}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "CHECK   RESULT  REASON\nlabel   skip    signature not checked\nserves  fail    exited\\x1b[31m red\nregistry.test/p@sha256:00: 0 passed, 1 failed, 1 skipped\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	if !rep.Failed() {
		t.Error("a failed check does not fail the report")
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Checks) != 2 || back.Checks[1].Status != Fail {
		t.Errorf("JSON %s: %v", b.String(), err)
	}
}

// TestGracePeriodIsKubernetesDefault: the operator sets no
// terminationGracePeriodSeconds, so the pod gets Kubernetes' default.
func TestGracePeriodIsKubernetesDefault(t *testing.T) {
	if GracePeriod.Seconds() != corev1.DefaultTerminationGracePeriodSeconds {
		t.Errorf("GracePeriod %s, Kubernetes' default %ds", GracePeriod, corev1.DefaultTerminationGracePeriodSeconds)
	}
}

// TestBuildPodIsTheOperatorsEnvironment checks the pod the harness runs
// carries what plugins.Compile gives a pod, on top of the image's own
// environment, and the files the kubelet would mount.
func TestBuildPodIsTheOperatorsEnvironment(t *testing.T) {
	m, err := plugins.ParseManifestLabel(`{"capabilities":["connector"],"egress":["api.example.com"]}`)
	if err != nil {
		t.Fatal(err)
	}
	w, err := compileWorkload(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg := configFile([]string{"/plugin"}, []string{"PATH=/bin", "HTTPS_PROXY=http://image.example"})
	pod, err := buildPod(nil, cfg, w, []byte(`{"a":1}`), []byte(`{"keys":[]}`), podTokens{core: "C", egress: "E"})
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(pod.Env, "\n")
	for _, want := range []string{
		"PATH=/bin", "HTTPS_PROXY=http://" + proxyAddress, "NO_PROXY=127.0.0.1",
		"OPENFIEF_INSTANCE=" + Instance, "OPENFIEF_LISTEN_PORT=8080", "OPENFIEF_CORE_ADDRESS=" + coreAddress,
		"OPENFIEF_CORE_SUBJECT=" + plugins.DefaultCoreSubject, "OPENFIEF_SA_JWKS_DIR=" + plugins.JWKSDir,
		"OPENFIEF_TOKEN_FILE=" + plugins.CoreTokenPath, "OPENFIEF_EGRESS_TOKEN_FILE=" + plugins.EgressTokenPath,
		`OPENFIEF_CONFIG={"a":1}`,
	} {
		if !strings.Contains(env+"\n", want+"\n") {
			t.Errorf("no %s in\n%s", want, env)
		}
	}
	var files []string
	for _, f := range pod.Files {
		files = append(files, f.Path+"="+string(f.Data))
	}
	wantFiles := []string{
		plugins.EgressTokenPath + "=E", plugins.JWKSDir + "/issuer=" + issuer,
		plugins.JWKSDir + `/jwks.json={"keys":[]}`, plugins.CoreTokenPath + "=C",
	}
	if strings.Join(files, " ") != strings.Join(wantFiles, " ") {
		t.Errorf("files %v, want %v", files, wantFiles)
	}
	if pod.UID != 65532 || pod.GID != 65532 || pod.Dir != "/" || pod.Limits.MemoryBytes != plugins.DefaultMemory+plugins.DefaultTmp || pod.Limits.CPUMilli != plugins.DefaultCPUMilli {
		t.Errorf("pod %+v", pod)
	}
	if strings.Join(pod.Listen, ",") != proxyAddress {
		t.Errorf("listen %v", pod.Listen)
	}
	if len(pod.Dirs) != 0 {
		t.Errorf("dirs %v for a manifest without Secrets", pod.Dirs)
	}

	// The manifest's Secrets are mounted where it says, empty.
	m, err = plugins.ParseManifestLabel(`{"capabilities":["connector"],"secrets":[{"name":"creds","mountPath":"/etc/acme/creds"},{"name":"api","mountPath":"/var/run/api"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if w, err = compileWorkload(m); err != nil {
		t.Fatal(err)
	}
	if pod, err = buildPod(nil, cfg, w, []byte(`{}`), []byte(`{"keys":[]}`), podTokens{core: "C"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pod.Dirs, " "); got != "/etc/acme/creds /var/run/api" {
		t.Errorf("dirs %q, want the Secrets' mount paths", got)
	}
}

// FuzzClean: whatever a plugin writes, clean gives one bounded line
// without control characters.
func FuzzClean(f *testing.F) {
	f.Add("plain", 10)
	f.Add("a\nb\x1b[2J\u202e\xff", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n%500 + 1
		if n < 1 {
			n = 1
		}
		got := clean(s, n)
		if strings.ContainsAny(got, "\n\r\x1b\x00\u202e") || !utf8.ValidString(got) {
			t.Errorf("clean(%q) = %q", s, got)
		}
	})
}
