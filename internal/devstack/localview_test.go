//go:build cluster

package devstack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/views/webdavcsv"
)

// TestLocalViewExportsToFakeDAV runs what `make demo` adds with the view,
// on the local platform with local plugins: the real nbp-fx and webdav-csv
// binaries as processes of the local runner, the in-process core, the real
// egress proxy and the WebDAV stand-in (golang.org/x/net/webdav). nbp-fx
// stores rates; the view, approved before its Secret exists (the runner
// waits for it, as a kubelet does), gets the Secret's keys as files where
// the SDK's SecretDir finds them and writes the rates as CSV into the
// stand-in's folder. dav.openfief.test resolves only in the proxy's
// resolver, so every file there came through the proxy.
func TestLocalViewExportsToFakeDAV(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var progress bytes.Buffer
	s, err := Start(ctx, Options{Dir: dir, LocalPlugins: true, Progress: &progress})
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, progress.String())
	}
	t.Cleanup(s.Stop)
	if s.FakeDAV == nil || s.FakeNBP == nil {
		t.Fatal("the local mode started no WebDAV or NBP stand-in")
	}
	openfief := func(args ...string) {
		t.Helper()
		var out bytes.Buffer
		code := cli.Main(ctx, append([]string{"--kubeconfig", s.KubeconfigPath}, args...), cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		if code != cli.ExitOK {
			t.Fatalf("openfief %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
	}

	// The connector stores rates.
	openfief("plugin", "install", "fx", "--image", s.Images["demo-v1"].String(), "--signers", s.SignersFile)
	openfief("plugin", "approve", "fx", "--yes")

	// The view, pointed at the stand-in's folder and approved with its
	// host before the Secret exists.
	cfg := filepath.Join(dir, "records.json")
	if err := os.WriteFile(cfg, []byte(`{"url":"`+s.FakeDAV.FolderURL()+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	openfief("plugin", "install", "records", "--image", s.Images["demo-view"].String(), "--signers", s.SignersFile, "--config", cfg)
	openfief("plugin", "approve", "records", "--host", FakeDAVHost, "--capability", "view", "--secret", "webdav-credentials", "--data-tier", "accounts", "--yes")
	openfief("plugin", "wait", "records", "--for", "Running", "--timeout", "120s")
	cs, err := kubernetes.NewForConfig(s.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "webdav-credentials", Namespace: plugins.Namespace},
		Data:       map[string][]byte{"username": []byte(s.FakeDAV.Username), "password": []byte(s.FakeDAV.Password)},
	}
	if _, err := cs.CoreV1().Secrets(plugins.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	fxFile := regexp.MustCompile(`^[0-9]{4}/[0-9]{4}-[0-9]{2}-fx-rates\.csv$`)
	var csv string
	testutil.Eventually(t, 2*time.Minute, "the view writes the stored rates into the stand-in's folder", func() (bool, string) {
		files, err := s.FakeDAV.Files()
		if err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(files, fxFile.MatchString)
		if i < 0 {
			return false, "files: " + strings.Join(files, ", ")
		}
		raw, err := s.FakeDAV.ReadFile(files[i])
		if err != nil {
			return false, err.Error()
		}
		csv = string(raw)
		return strings.Count(csv, "\n") >= 3, "the file holds:\n" + csv
	})
	lines := strings.Split(strings.TrimSuffix(csv, "\n"), "\n")
	if want := "sequence,source,institution,institution_name,date,base_currency,quote_currency,rate,source_ref"; lines[0] != want {
		t.Errorf("header %q, want %q", lines[0], want)
	}
	for _, want := range []string{",fx,nbp,Narodowy Bank Polski,", ",EUR,PLN,4.2301,", ",USD,PLN,3.6589,"} {
		if !strings.Contains(csv, want) {
			t.Errorf("the CSV lacks %q:\n%s", want, csv)
		}
	}

	// The runner projected the Secret as the kubelet would, under the root
	// it gave the process, at the manifest's mount path, 0600.
	creds := filepath.Join(dir, "local-plugins", "records", "secrets", webdavcsv.DefaultCredentialsDir)
	for key, want := range map[string]string{"username": s.FakeDAV.Username, "password": s.FakeDAV.Password} {
		p := filepath.Join(creds, key)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(p)
		if err != nil || string(raw) != want || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, content matches %v (%v); want the Secret's key, 0600", p, fi.Mode().Perm(), string(raw) == want, err)
		}
	}
}
