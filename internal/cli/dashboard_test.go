//go:build cluster

package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/dashboard"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestDashboardCommand runs `openfief dashboard --no-browser` against the
// shared control plane: it prints a URL with a token, serves the plugins of
// its namespace only to that token, and exits 0 on cancellation (Ctrl-C).
// The page itself is tested in a browser in internal/dashboard.
func TestDashboardCommand(t *testing.T) {
	k := newKube(t)
	ns := "dash-cmd"
	if err := k.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := testutil.MakePlugin("dash-a", testutil.Image("dash-a")).Capabilities("connector").Obj()
	p.Namespace = ns
	if err := k.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}

	var out syncBuffer
	env := NewEnv(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env, []string{"--kubeconfig", k.kubeconfig, "-n", ns, "dashboard", "--no-browser"})
	}()
	urlRE := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/[0-9a-f]{32}/`)
	var url string
	testutil.Eventually(t, 30*time.Second, "the dashboard's URL", func() (bool, string) {
		url = urlRE.FindString(out.String())
		return url != "", out.String()
	})
	// The token is the URL's first path segment: the origin alone is refused.
	token := strings.Trim(url[strings.LastIndex(url[:len(url)-1], "/"):], "/")
	base := strings.TrimSuffix(url, token+"/")

	c := &http.Client{Timeout: 10 * time.Second}
	var page string
	testutil.Eventually(t, 30*time.Second, "the plugins page", func() (bool, string) {
		resp, err := c.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		page = string(b)
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	for _, w := range []string{`<tr data-name="dash-a">`, "Plugins in namespace " + ns} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q:\n%s", w, page)
		}
	}
	// The command reads the core as `plugin status` does; none runs in
	// this namespace (not even the owner's ServiceAccount exists), and the
	// page says so in a line.
	testutil.Eventually(t, 30*time.Second, "the line saying the core did not answer", func() (bool, string) {
		resp, err := c.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "the core did not answer: serviceaccount "+ns+"/openfief-owner"), string(b)
	})
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %s, want 401", resp.Status)
	}

	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("exit code %d after Ctrl-C, want 0:\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the dashboard did not stop after cancellation")
	}
	if n := strings.Count(out.String(), token); n != 1 {
		t.Errorf("the token appears %d times in the output, want once (the URL):\n%s", n, out.String())
	}
}

// TestDashboardOpensBrowserWithoutToken: the browser is started on a
// launcher file only the owner can read, so the token is in no command
// line; the file leads to the URL and is gone when the dashboard stops.
func TestDashboardOpensBrowserWithoutToken(t *testing.T) {
	k := newKube(t)
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	script := filepath.Join(dir, "browser")
	writeFile(t, script, "#!/bin/sh\nprintf '%s\\n' \"$@\" > "+argsFile+".tmp && mv "+argsFile+".tmp "+argsFile+"\n")
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", script)

	var out syncBuffer
	env := NewEnv(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, env, []string{"--kubeconfig", k.kubeconfig, "dashboard"}) }()
	var args []byte
	testutil.Eventually(t, 30*time.Second, "the browser to be started", func() (bool, string) {
		var err error
		args, err = os.ReadFile(argsFile)
		return err == nil, out.String()
	})
	url := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/[0-9a-f]{32}/`).FindString(out.String())
	token := strings.Trim(url[strings.LastIndex(url[:len(url)-1], "/"):], "/")
	arg := strings.TrimSpace(string(args))
	if strings.Contains(arg, token) || !strings.HasPrefix(arg, "file:///") {
		t.Fatalf("the browser was started with %q, want a file:// launcher without the token", arg)
	}
	launcher := strings.TrimPrefix(arg, "file://")
	info, err := os.Stat(launcher)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the launcher's mode is %v, want 0600", info.Mode().Perm())
	}
	page, err := os.ReadFile(launcher)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `content="0;url=`+url+`"`) {
		t.Errorf("the launcher does not lead to %s:\n%s", url, page)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Errorf("exit code %d, want 0:\n%s", code, out.String())
	}
	if _, err := os.Stat(launcher); !os.IsNotExist(err) {
		t.Errorf("the launcher is still there after the dashboard stopped: %v", err)
	}
}

// TestApprovePending approves what a plugin waits for as `plugin approve
// --yes` does, but only for the versions the owner confirmed.
func TestApprovePending(t *testing.T) {
	k := newKube(t)
	ns := "dash-approve"
	if err := k.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := testutil.MakePlugin("dash-b", testutil.Image("dash-b")).Capabilities("connector").Egress("api.nbp.pl").Obj()
	p.Namespace = ns
	if err := k.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	env := NewEnv(Streams{})
	env.Kubeconfig, env.Namespace = k.kubeconfig, ns
	ctx := context.Background()
	if _, err := env.ApprovePending(ctx, dashboard.ApprovalRequest{Name: "dash-b", PluginVersion: "1", GrantVersion: ""}); !errors.Is(err, dashboard.ErrChanged) {
		t.Fatalf("an approval of another version of the plugin: %v, want ErrChanged", err)
	}
	msg, err := env.ApprovePending(ctx, dashboard.ApprovalRequest{Name: "dash-b", PluginVersion: p.ResourceVersion})
	if err != nil || msg != "plugingrant/dash-b created" {
		t.Fatalf("approve: %q, %v", msg, err)
	}
	var g v1alpha1.PluginGrant
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dash-b"}, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Spec.Egress) != 1 || g.Spec.Egress[0] != "api.nbp.pl:443" || len(g.Spec.Capabilities) != 1 {
		t.Errorf("grant %+v, want connector and api.nbp.pl:443", g.Spec)
	}
	// The page that showed no grant is out of date now.
	if _, err := env.ApprovePending(ctx, dashboard.ApprovalRequest{Name: "dash-b", PluginVersion: p.ResourceVersion}); !errors.Is(err, dashboard.ErrChanged) {
		t.Errorf("a second approval from the same page: %v, want ErrChanged", err)
	}
	if _, err := env.ApprovePending(ctx, dashboard.ApprovalRequest{Name: "dash-b", PluginVersion: p.ResourceVersion, GrantVersion: g.ResourceVersion}); ExitCode(err) != ExitNothingToDo {
		t.Errorf("approving with nothing pending: %v, want exit %d", err, ExitNothingToDo)
	}
}

// syncBuffer is a bytes.Buffer safe to write and read from two goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
