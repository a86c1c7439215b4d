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

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// localPlugins plays the kubelet for the demo plugin (Options.LocalPlugins):
// kwok runs no container, so for every Plugin that runs a demo image it
// starts the nbp-fx binary built from this tree as a local process, with
// the environment the operator computed for its pod, token files from
// TokenRequest and the openfief-sa-jwks content, reaching the egress proxy
// on loopback. The core calls it there (resolve). A plugin that stops
// running (revoked, uninstalled) has its process stopped.
type localPlugins struct {
	cl        client.Client
	cs        kubernetes.Interface
	bin, dir  string
	proxyAddr string
	caFile    string
	repo      string
	log       *slog.Logger

	mu    sync.Mutex
	procs map[string]*localProc
}

type localProc struct {
	image  string
	url    string
	cancel context.CancelFunc
	done   chan struct{}
}

// localTokenSeconds is how long the token files the runner writes last;
// it does not rotate them, so they outlast a demo.
const localTokenSeconds = 3600

// startLocalPlugins builds nbp-fx and follows the Plugins until ctx is done.
func (s *Stack) startLocalPlugins(ctx context.Context, opts Options, nbpCA string) (*localPlugins, error) {
	root, err := sourceRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.Dir, "local-plugins")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, DemoPlugin)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./plugins/"+DemoPlugin)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", DemoPlugin, err, out)
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
		cl: cl, cs: cs, bin: bin, dir: dir, proxyAddr: s.ProxyAddress, caFile: nbpCA,
		repo: s.RegistryHost + "/plugins/" + DemoPlugin + "@",
		log:  slog.New(slog.NewTextHandler(orDiscard(opts.Logs), nil)), procs: map[string]*localProc{},
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

// resolve is the core's Resolver: the local process when one runs.
func (lp *localPlugins) resolve(instance string) string {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if p, ok := lp.procs[instance]; ok {
		return p.url
	}
	return core.ServiceResolver(plugins.Namespace, plugins.DefaultPluginPort)(instance)
}

// sync starts a process for every running demo plugin and stops the others.
func (lp *localPlugins) sync(ctx context.Context) {
	var list v1alpha1.PluginList
	if err := lp.cl.List(ctx, &list, client.InNamespace(plugins.Namespace)); err != nil {
		return
	}
	want := map[string]string{}
	for i := range list.Items {
		p := &list.Items[i]
		t, ok := core.TargetOf(p)
		if ok && t.Connector && p.Status.Deployed != nil && strings.HasPrefix(p.Status.Deployed.Image, lp.repo) {
			want[p.Name] = p.Status.Deployed.Image
		}
	}
	lp.mu.Lock()
	var stop []*localProc
	for name, p := range lp.procs {
		if img, ok := want[name]; !ok || img != p.image {
			stop = append(stop, p)
			delete(lp.procs, name)
		}
	}
	lp.mu.Unlock()
	for _, p := range stop {
		p.cancel()
		<-p.done
	}
	for name, img := range want {
		lp.mu.Lock()
		_, running := lp.procs[name]
		lp.mu.Unlock()
		if running {
			continue
		}
		p, err := lp.start(ctx, name, img)
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

// start runs the plugin with its pod's environment, as the kubelet would.
func (lp *localPlugins) start(ctx context.Context, name, image string) (*localProc, error) {
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
	env["SSL_CERT_FILE"] = lp.caFile

	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cmd := exec.CommandContext(pctx, lp.bin)
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
	return &localProc{image: image, url: "http://127.0.0.1:" + strconv.Itoa(port), cancel: cancel, done: done}, nil
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
