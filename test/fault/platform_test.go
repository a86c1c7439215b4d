//go:build cluster

package fault

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// platform is one test's control plane with the openfief namespace, the
// core's and proxy's Services, and admin clients.
type platform struct {
	t       *testing.T
	began   time.Time
	dir     string
	cluster *devcluster.Cluster
	cl      client.Client
	cs      kubernetes.Interface

	logMu sync.Mutex

	// tolerateGCLeaks makes the convergence checks report, not fail on,
	// what the garbage collector left behind (snapshot.moveGCLeaks), and
	// gcLeaks is what the last check found.
	tolerateGCLeaks bool
	gcLeaks         []string
}

// Selector values of the core's and proxy's Services (no pods run behind
// them; the operator only reads their selectors and ports).
const (
	coreSelector  = "openfief-core"
	proxySelector = "openfief-egress-proxy"
)

// newPlatform starts a full control plane of the test's own (so restarts
// and leftovers never reach another test) and installs the namespace and
// the Services the operator expects. Cleanup stops it.
func newPlatform(t *testing.T) *platform {
	t.Helper()
	p := &platform{t: t, began: time.Now(), dir: t.TempDir()}
	crds := filepath.Join(p.dir, "crds")
	if err := os.Mkdir(crds, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := deploy.WriteCRDs(crds); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{Mode: devcluster.Full, Nodes: 2, CRDDirectoryPaths: []string{crds}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	p.cluster = c
	// Registered after Stop's cleanup, so it runs before it.
	t.Cleanup(p.keepLogs)
	cfg := p.adminConfig()
	if p.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	s, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if p.cl, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	if err := p.installNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	p.logf("control plane up (%s)", c.Dir)
	return p
}

// adminConfig is the cluster's admin identity, not rate-limited: the suite
// polls a lot.
func (p *platform) adminConfig() *rest.Config {
	cfg := rest.CopyConfig(p.cluster.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.Timeout = 15 * time.Second
	return cfg
}

// logf logs with the time since the test began.
func (p *platform) logf(format string, args ...any) {
	p.t.Helper()
	p.logMu.Lock()
	defer p.logMu.Unlock()
	p.t.Logf("[%6.2fs] %s", time.Since(p.began).Seconds(), fmt.Sprintf(format, args...))
}

// installNamespace creates the namespace from deploy/crds (restricted Pod
// Security), the core's and proxy's Services and the core's ServiceAccount,
// as devstack does.
func (p *platform) installNamespace(ctx context.Context) error {
	var ns corev1.Namespace
	if err := yaml.UnmarshalStrict(deploy.Namespace(), &ns); err != nil {
		return err
	}
	if _, err := p.cs.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := func(name, port string, podPort int32, selector string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plugins.Namespace},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app.kubernetes.io/name": selector},
				Ports:    []corev1.ServicePort{{Name: port, Port: podPort, TargetPort: intstr.FromInt32(podPort), Protocol: corev1.ProtocolTCP}},
			},
		}
	}
	for _, s := range []*corev1.Service{
		svc(operator.DefaultCoreService, operator.DefaultCorePort, 8080, coreSelector),
		svc(operator.DefaultProxyService, operator.DefaultProxyPort, 3128, proxySelector),
	} {
		if _, err := p.cs.CoreV1().Services(plugins.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "openfief-core", Namespace: plugins.Namespace}, AutomountServiceAccountToken: ptr.To(false)}
	_, err := p.cs.CoreV1().ServiceAccounts(plugins.Namespace).Create(ctx, sa, metav1.CreateOptions{})
	return err
}

// writeKubeconfig writes a kubeconfig for server: the tap's plain-HTTP
// address (no credentials: the tap adds the admin identity), or the API
// server itself with the admin identity when server is empty.
func (p *platform) writeKubeconfig(name, server string) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name+".kubeconfig")
	if server == "" {
		raw, err := os.ReadFile(p.cluster.KubeconfigPath)
		if err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			p.t.Fatal(err)
		}
		return path
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["tap"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["none"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["tap"] = &clientcmdapi.Context{Cluster: "tap", AuthInfo: "none"}
	cfg.CurrentContext = "tap"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// LogsEnv names the environment variable of a directory that receives the
// logs of a failed test (control plane, operator replicas).
const LogsEnv = "OPENFIEF_FAULT_LOGS"

// keepLogs copies the control plane's and the replicas' logs of a failed
// test to $OPENFIEF_FAULT_LOGS/<test>, when set.
func (p *platform) keepLogs() {
	dest := os.Getenv(LogsEnv)
	if dest == "" || !p.t.Failed() {
		return
	}
	dest = filepath.Join(dest, filepath.Base(p.t.Name()))
	if err := os.MkdirAll(dest, 0o700); err != nil {
		p.t.Log(err)
		return
	}
	var files []string
	for _, glob := range []string{filepath.Join(p.cluster.Dir, "logs", "*.log"), filepath.Join(p.dir, "*.log")} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dest, filepath.Base(f)), raw, 0o600)
		}
		if err != nil {
			p.t.Log(err)
		}
	}
	p.t.Logf("logs kept in %s", dest)
}

func newSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
