package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	openfief "github.com/arkadiuss/openfief/sdk/go"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// localPlugins plays the kubelet for the demo plugins (Options.LocalPlugins):
// kwok runs no container, so for every Plugin that runs a demo image, a
// connector or a view, it starts that plugin's binary built from this tree
// (nbp-fx, webdav-csv) as a local process, with the environment the
// operator computed for its pod, token files from TokenRequest, the
// openfief-sa-jwks content and the granted Secrets as files, reaching the
// egress proxy on loopback. The core calls it there (resolve). A plugin
// that stops running (revoked, uninstalled) has its process stopped.
type localPlugins struct {
	cl        client.Client
	cs        kubernetes.Interface
	dir       string
	proxyAddr string
	caFile    string
	// bins maps an image repository, as "host/repository@", to the binary
	// that plays its images.
	bins map[string]string
	log  *slog.Logger

	mu    sync.Mutex
	procs map[string]*localProc
}

type localProc struct {
	image string
	// generation is the Deployment's that the process was started from.
	generation int64
	url        string
	cancel     context.CancelFunc
	done       chan struct{}
}

// localWant is what a running plugin's process must have been started
// from.
type localWant struct {
	image      string
	generation int64
}

// localTokenSeconds is how long the token files the runner writes last;
// it does not rotate them, so they outlast a demo.
const localTokenSeconds = 3600

// startLocalPlugins builds the demo plugins, writes cas (the stand-ins'
// CA certificates, PEM; none keeps the system's roots) into one bundle for
// SSL_CERT_FILE, and follows the Plugins until ctx is done.
func (s *Stack) startLocalPlugins(ctx context.Context, opts Options, cas [][]byte) (*localPlugins, error) {
	root, err := sourceRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.Dir, "local-plugins")
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o700); err != nil {
		return nil, err
	}
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	bins := map[string]string{}
	for _, name := range demoPlugins() {
		args = append(args, "./plugins/"+name)
		bins[s.RegistryHost+"/plugins/"+name+"@"] = filepath.Join(binDir, name)
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	caFile := ""
	if len(cas) > 0 {
		caFile = filepath.Join(dir, "stand-in-cas.pem")
		var bundle []byte
		for _, pem := range cas {
			bundle = append(bundle, pem...)
		}
		if err := os.WriteFile(caFile, bundle, 0o600); err != nil {
			return nil, err
		}
	}
	scheme, err := apiconv.NewScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(s.Cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(s.Cluster.Config)
	if err != nil {
		return nil, err
	}
	lp := &localPlugins{
		cl: cl, cs: cs, dir: dir, proxyAddr: s.ProxyAddress, caFile: caFile, bins: bins,
		log: slog.New(slog.NewTextHandler(orDiscard(opts.Logs), nil)), procs: map[string]*localProc{},
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				lp.stopAll()
				return
			case <-t.C:
				lp.sync(ctx)
			}
		}
	}()
	return lp, nil
}

// binaryFor is the binary that plays image, if it is a demo image.
func (lp *localPlugins) binaryFor(image string) (string, bool) {
	for repo, bin := range lp.bins {
		if strings.HasPrefix(image, repo) {
			return bin, true
		}
	}
	return "", false
}

// resolve is the core's Resolver: the local process when one runs.
func (lp *localPlugins) resolve(instance string) string {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if p, ok := lp.procs[instance]; ok {
		return p.url
	}
	return core.ServiceResolver(plugins.Namespace, plugins.DefaultPluginPort)(instance)
}

// sync starts a process for every running demo plugin, connector or view,
// and stops the others. Like a kubelet, it starts a plugin's process again
// when its Deployment changed (another image, grant or Secret binding).
func (lp *localPlugins) sync(ctx context.Context) {
	var list v1alpha1.PluginList
	if err := lp.cl.List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
		return
	}
	var deps appsv1.DeploymentList
	if err := lp.cl.List(ctx, &deps, client.InNamespace(plugins.Namespace)); err != nil {
		return
	}
	generation := map[string]int64{}
	for _, d := range deps.Items {
		generation[d.Name] = d.Generation
	}
	want := map[string]localWant{}
	for i := range list.Items {
		p := &list.Items[i]
		t, ok := core.TargetOf(p)
		if !ok || (!t.Connector && !t.View) || p.Status.Deployed == nil {
			continue
		}
		if _, demo := lp.binaryFor(p.Status.Deployed.Image); demo {
			want[p.Name] = localWant{image: p.Status.Deployed.Image, generation: generation[plugins.ServiceAccountName(p.Name)]}
		}
	}
	lp.mu.Lock()
	var stop []*localProc
	for name, p := range lp.procs {
		if w, ok := want[name]; !ok || w.image != p.image || w.generation != p.generation {
			stop = append(stop, p)
			delete(lp.procs, name)
		}
	}
	lp.mu.Unlock()
	for _, p := range stop {
		p.cancel()
		<-p.done
	}
	for name, w := range want {
		lp.mu.Lock()
		_, running := lp.procs[name]
		lp.mu.Unlock()
		if running {
			continue
		}
		p, err := lp.start(ctx, name, w.image)
		if err != nil {
			lp.log.Warn("local plugin not started", "plugin", name, "error", err.Error())
			continue
		}
		lp.mu.Lock()
		lp.procs[name] = p
		lp.mu.Unlock()
		lp.log.Info("local plugin started", "plugin", name, "url", p.url)
	}
}

// start runs the plugin with its pod's environment and its granted
// Secrets, as the kubelet would.
func (lp *localPlugins) start(ctx context.Context, name, image string) (*localProc, error) {
	bin, ok := lp.binaryFor(image)
	if !ok {
		return nil, fmt.Errorf("no local binary plays %s", image)
	}
	key := func(n string) client.ObjectKey { return client.ObjectKey{Namespace: plugins.Namespace, Name: n} }
	var dep appsv1.Deployment
	if err := lp.cl.Get(ctx, key(plugins.ServiceAccountName(name)), &dep); err != nil {
		return nil, err
	}
	var cfg, jwks corev1.ConfigMap
	if err := lp.cl.Get(ctx, key(plugins.ServiceAccountName(name)), &cfg); err != nil {
		return nil, err
	}
	if err := lp.cl.Get(ctx, key(plugins.SigningKeysConfigMap), &jwks); err != nil {
		return nil, err
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		return nil, fmt.Errorf("deployment has %d containers", len(dep.Spec.Template.Spec.Containers))
	}
	env := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == cfg.Name:
			env[e.Name] = cfg.Data[e.ValueFrom.ConfigMapKeyRef.Key]
		}
	}
	dir := filepath.Join(lp.dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "jwks"), 0o700); err != nil {
		return nil, err
	}
	for k, v := range jwks.Data {
		if err := os.WriteFile(filepath.Join(dir, "jwks", k), []byte(v), 0o600); err != nil {
			return nil, err
		}
	}
	env[plugins.EnvSAJWKSDir] = filepath.Join(dir, "jwks")
	for envVar, audience := range map[string]string{plugins.EnvTokenFile: plugins.AudienceCore, plugins.EnvEgressTokenFile: plugins.AudienceEgress} {
		if envVar == plugins.EnvEgressTokenFile && env[envVar] == "" {
			continue // no egress granted: no egress token
		}
		tr, err := lp.cs.CoreV1().ServiceAccounts(plugins.Namespace).CreateToken(ctx, plugins.ServiceAccountName(name), &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](localTokenSeconds)},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, audience)
		if err := os.WriteFile(p, []byte(tr.Status.Token), 0o600); err != nil {
			return nil, err
		}
		env[envVar] = p
	}
	// The granted Secrets as files under secrets/, where the SDK's
	// SecretDir finds each mount path (the pod mounts them at the path
	// itself, which a process of this machine cannot).
	secrets := filepath.Join(dir, "secrets")
	if err := projectSecrets(ctx, lp.cs, dep.Spec.Template.Spec, secrets); err != nil {
		return nil, err
	}
	env[openfief.EnvSecretsRoot] = secrets
	if env[plugins.EnvHTTPSProxy] != "" {
		env[plugins.EnvHTTPSProxy] = "http://" + lp.proxyAddr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return nil, err
	}
	env[plugins.EnvListenPort] = strconv.Itoa(port)
	if lp.caFile != "" {
		env["SSL_CERT_FILE"] = lp.caFile
	}

	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cmd := exec.CommandContext(pctx, bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logf, err := os.Create(filepath.Join(dir, "plugin.log"))
	if err != nil {
		cancel()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		cancel()
		_ = logf.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cmd.Wait()
		_ = logf.Close()
	}()
	return &localProc{image: image, generation: dep.Generation, url: "http://127.0.0.1:" + strconv.Itoa(port), cancel: cancel, done: done}, nil
}

func (lp *localPlugins) stopAll() {
	lp.mu.Lock()
	procs := lp.procs
	lp.procs = map[string]*localProc{}
	lp.mu.Unlock()
	for _, p := range procs {
		p.cancel()
		<-p.done
	}
}
