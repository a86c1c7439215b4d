package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
// egress proxy on loopback. The core calls it there (resolve): at a
// loopback listener the runner opens and holds for as long as the route
// exists, and hands to the process as an inherited descriptor, so no other
// process of the machine can take the port between its choice and the
// plugin's accept, nor while the plugin is down. A process that exits is
// started again on the same listener (supervise). A plugin that stops
// running (revoked, uninstalled) has its route removed first, then its
// process stopped; its listener is held for the core's call timeout after
// that (hold), for a call that resolved the route just before.
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
	// hold is how long a removed route's listener stays open.
	hold time.Duration
	// restart is how a process that exited is started again.
	restart restartPolicy
	// done is closed once the runner stopped every process and closed
	// every listener.
	done chan struct{}

	mu     sync.Mutex
	routes map[string]*localRoute
	// held are the listeners of removed routes, until their hold ends.
	held    map[*net.TCPListener]*time.Timer
	stopped bool
}

// localRoute is where the core calls one running plugin: a loopback
// listener the runner holds, and the supervisor of the plugin's process
// on it.
type localRoute struct {
	image string
	// generation is the Deployment's that the process was started from.
	generation int64
	url        string
	ln         *net.TCPListener
	proc       *supervisor
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
	callTimeout := opts.CoreScheduler.CallTimeout
	if callTimeout <= 0 {
		callTimeout = core.DefaultCallTimeout
	}
	lp := &localPlugins{
		cl: cl, cs: cs, dir: dir, proxyAddr: s.ProxyAddress, caFile: caFile, bins: bins,
		log:  slog.New(slog.NewTextHandler(orDiscard(opts.Logs), nil)),
		hold: callTimeout + 10*time.Second, restart: defaultRestart, done: make(chan struct{}),
		routes: map[string]*localRoute{}, held: map[*net.TCPListener]*time.Timer{},
	}
	go func() {
		defer close(lp.done)
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

// resolve is the core's Resolver: the listener the runner holds for the
// instance's process, when it has a route.
func (lp *localPlugins) resolve(instance string) string {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if r, ok := lp.routes[instance]; ok {
		return r.url
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
	var drop []*localRoute
	for name, r := range lp.routes {
		if w, ok := want[name]; !ok || w.image != r.image || w.generation != r.generation {
			drop = append(drop, r)
			delete(lp.routes, name)
		}
	}
	lp.mu.Unlock()
	for _, r := range drop {
		r.proc.stop()
		lp.release(r.ln)
	}
	for name, w := range want {
		lp.mu.Lock()
		_, running := lp.routes[name]
		lp.mu.Unlock()
		if running {
			continue
		}
		r, err := lp.start(ctx, name, w)
		if err != nil {
			lp.log.Warn("local plugin not started", "plugin", name, "error", err.Error())
			continue
		}
		lp.mu.Lock()
		lp.routes[name] = r
		lp.mu.Unlock()
		lp.log.Info("local plugin started", "plugin", name, "url", r.url)
	}
}

// release closes a removed route's listener once lp.hold has passed, or at
// once when the runner stopped.
func (lp *localPlugins) release(ln *net.TCPListener) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.stopped {
		_ = ln.Close()
		return
	}
	lp.held[ln] = time.AfterFunc(lp.hold, func() {
		lp.mu.Lock()
		delete(lp.held, ln)
		lp.mu.Unlock()
		_ = ln.Close()
	})
}

// start opens the route's listener and runs the plugin on it, with its
// pod's environment and its granted Secrets, as the kubelet would.
func (lp *localPlugins) start(ctx context.Context, name string, w localWant) (*localRoute, error) {
	spec, generation, err := lp.prepare(ctx, name, w.image)
	if err != nil {
		return nil, err
	}
	// A new route starts a new log; the processes started again on it
	// append to it.
	if err := os.WriteFile(spec.logFile, nil, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return &localRoute{
		image: w.image, generation: generation,
		url: "http://" + ln.Addr().String(), ln: ln,
		proc: supervise(ctx, lp.log, name, spec, ln, lp.restart),
	}, nil
}

// prepare writes what the plugin's process reads (the signing keys, its
// token files, its granted Secrets) and returns how to start it, and the
// generation of the Deployment it follows.
func (lp *localPlugins) prepare(ctx context.Context, name, image string) (procSpec, int64, error) {
	bin, ok := lp.binaryFor(image)
	if !ok {
		return procSpec{}, 0, fmt.Errorf("no local binary plays %s", image)
	}
	key := func(n string) client.ObjectKey { return client.ObjectKey{Namespace: plugins.Namespace, Name: n} }
	var dep appsv1.Deployment
	if err := lp.cl.Get(ctx, key(plugins.ServiceAccountName(name)), &dep); err != nil {
		return procSpec{}, 0, err
	}
	var cfg, jwks corev1.ConfigMap
	if err := lp.cl.Get(ctx, key(plugins.ServiceAccountName(name)), &cfg); err != nil {
		return procSpec{}, 0, err
	}
	if err := lp.cl.Get(ctx, key(plugins.TokenKeysConfigMap), &jwks); err != nil {
		return procSpec{}, 0, err
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		return procSpec{}, 0, fmt.Errorf("deployment has %d containers", len(dep.Spec.Template.Spec.Containers))
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
		return procSpec{}, 0, err
	}
	for k, v := range jwks.Data {
		if err := os.WriteFile(filepath.Join(dir, "jwks", k), []byte(v), 0o600); err != nil {
			return procSpec{}, 0, err
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
			return procSpec{}, 0, err
		}
		p := filepath.Join(dir, audience)
		if err := os.WriteFile(p, []byte(tr.Status.Token), 0o600); err != nil {
			return procSpec{}, 0, err
		}
		env[envVar] = p
	}
	// The granted Secrets as files under secrets/, where the SDK's
	// SecretDir finds each mount path (the pod mounts them at the path
	// itself, which a process of this machine cannot).
	secrets := filepath.Join(dir, "secrets")
	if err := projectSecrets(ctx, lp.cs, dep.Spec.Template.Spec, secrets); err != nil {
		return procSpec{}, 0, err
	}
	env[openfief.EnvSecretsRoot] = secrets
	if env[plugins.EnvHTTPSProxy] != "" {
		env[plugins.EnvHTTPSProxy] = "http://" + lp.proxyAddr
	}
	// The port and the listener are the runner's (supervise).
	delete(env, plugins.EnvListenPort)
	delete(env, openfief.EnvListenFD)
	if lp.caFile != "" {
		env["SSL_CERT_FILE"] = lp.caFile
	}
	spec := procSpec{bin: bin, logFile: filepath.Join(dir, "plugin.log"), env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}}
	for k, v := range env {
		spec.env = append(spec.env, k+"="+v)
	}
	return spec, dep.Generation, nil
}

// stopAll removes every route, stops every process and closes every
// listener; the core is stopped by then.
func (lp *localPlugins) stopAll() {
	lp.mu.Lock()
	routes, held := lp.routes, lp.held
	lp.routes, lp.held, lp.stopped = map[string]*localRoute{}, map[*net.TCPListener]*time.Timer{}, true
	lp.mu.Unlock()
	for _, r := range routes {
		r.proc.stop()
		_ = r.ln.Close()
	}
	for ln, t := range held {
		t.Stop()
		_ = ln.Close()
	}
}
