//go:build cluster

package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// fakeCore is an owner API that records, for each request, whether its
// owner header held a token the API server authenticates for the owner's
// audience as the owner's ServiceAccount, and answers like the core.
type fakeCore struct {
	cs kubernetes.Interface
	ns string

	mu       sync.Mutex
	requests []string // "METHOD path verdict"
	// redirect, when set, is where every request is redirected (302).
	redirect string
}

func (f *fakeCore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	redirect := f.redirect
	f.mu.Unlock()
	if redirect != "" {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path+" redirected")
		f.mu.Unlock()
		http.Redirect(w, r, redirect+r.URL.Path, http.StatusFound)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/refuse/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(ownerapi.ErrorResponse{Error: ownerapi.ReasonNotOwner + ": someone else's token", Reason: ownerapi.ReasonNotOwner})
		return
	}
	verdict := "no token"
	if tok := r.Header.Get(ownerapi.HeaderOwnerToken); tok != "" {
		tr, err := f.cs.AuthenticationV1().TokenReviews().Create(r.Context(), &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{ownerapi.Audience}},
		}, metav1.CreateOptions{})
		switch {
		case err != nil:
			verdict = "review failed"
		case tr.Status.Authenticated && slices.Contains(tr.Status.Audiences, ownerapi.Audience) && tr.Status.User.Username == ownerapi.OwnerUsername(f.ns):
			verdict = "owner"
		default:
			verdict = "refused"
		}
	}
	if r.Header.Get("Authorization") != "" {
		verdict += ", with Authorization"
	}
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path+" "+verdict)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if verdict != "owner" {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(ownerapi.ErrorResponse{Error: ownerapi.ReasonTokenRefused + ": " + verdict, Reason: ownerapi.ReasonTokenRefused})
		return
	}
	if r.Method == http.MethodPost {
		_ = json.NewEncoder(w).Encode(ownerapi.ImportResponse{Plugin: "x", Problems: 1})
		return
	}
	_ = json.NewEncoder(w).Encode(ownerapi.InstanceStatus{Plugin: "x", Scheduled: true})
}

// take returns the requests recorded since the last call.
func (f *fakeCore) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.requests
	f.requests = nil
	return r
}

// serveFakeCore serves a fakeCore on ip and on 127.0.0.1 (the CLI sends
// the owner's token over plain http to loopback only) and returns it and
// the two addresses.
func serveFakeCore(t *testing.T, cs kubernetes.Interface, ns, ip string) (f *fakeCore, hostAddr, loopbackAddr string) {
	t.Helper()
	f = &fakeCore{cs: cs, ns: ns}
	serve := func(ip string) string {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: f}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ln.Addr().String()
	}
	return f, serve(ip), serve("127.0.0.1")
}

// asUser writes a kubeconfig that acts as user (impersonation by the
// admin's credentials) and returns a kube using it.
func (k *kube) asUser(t *testing.T, user string) *kube {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+user)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return &kube{kubeconfig: path, c: k.c}
}

// applyOwnerRole applies deploy/core's openfief-owner ServiceAccount and Role
// and binds the Role to user.
func applyOwnerRole(t *testing.T, k *kube, cs kubernetes.Interface, user string) {
	t.Helper()
	objs, err := deploy.Render(filepath.Join("..", "..", "deploy", "core"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if (u.GetKind() == "ServiceAccount" || u.GetKind() == "Role") && u.GetName() == ownerapi.ServiceAccount {
			if err := k.c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("cli-test"), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err = cs.RbacV1().RoleBindings(plugins.Namespace).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "owner-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ownerapi.OwnerRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestOwnerToken (OF-18): `plugin import` and `plugin status` send the
// owner's token, minted with the kubeconfig's identity, in the owner header,
// both to --core-url and through the API server's real service proxy (to a
// stand-in core that asks TokenReview about it), where the header arrives
// and Authorization does not. A user bound to the Role openfief-owner alone
// imports through the proxy; a user without it is told which Role to ask
// for; without the ServiceAccount the CLI says to install the core.
func TestOwnerToken(t *testing.T) {
	k := newKube(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := plugins.Namespace
	t.Setenv(EnvCoreURL, "")
	const alice = "alice-owner"
	applyOwnerRole(t, k, cs, alice)
	if err := k.c.Create(context.Background(), testutil.MakePlugin("ownertok", testutil.Image("fx")).Obj()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	file := tempFile(t, "statement.csv", "a;b\n")
	ip := testutil.HostAddress(t)
	core, hostAddr, loopbackAddr := serveFakeCore(t, cs, ns, ip)
	_, port, _ := net.SplitHostPort(hostAddr)

	// --core-url: straight to the core, with the token; plain http only to
	// loopback, refused before a token is minted to any other address.
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "ownertok", file, "--core-url", "http://"+hostAddr), ExitUsage,
		"--core-url \"http://"+hostAddr+"\": the owner's token is sent only over https, or over http to a loopback address")
	if got := core.take(); len(got) != 0 {
		t.Errorf("--core-url http to a non-loopback address still reached the core: %q", got)
	}
	direct := "http://" + loopbackAddr
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "ownertok", file, "--core-url", direct), ExitOK, "1 problems")
	expect(t, openfief(t, k, runOpts{}, "plugin", "status", "ownertok", "--core-url", direct), ExitOK, "Called:     yes")
	if got, want := core.take(), []string{"POST /v1/plugins/ownertok/import owner", "GET /v1/plugins/ownertok/status owner", "GET /v1/status owner"}; !slices.Equal(got, want) {
		t.Errorf("direct: the core saw %q, want %q", got, want)
	}

	// Through the service proxy of the real API server.
	testutil.EnsureServiceAccount(t, cs, ns, "stand-in")
	testutil.ServeServiceAt(t, cs, ns, ownerapi.ServiceName, ownerapi.ServicePort, "stand-in", ip, port)
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "ownertok", file), ExitOK, "1 problems")
	expect(t, openfief(t, k, runOpts{}, "plugin", "status", "ownertok"), ExitOK, "Called:     yes")
	expect(t, openfief(t, k.asUser(t, alice), runOpts{}, "plugin", "import", "ownertok", file), ExitOK, "1 problems")
	if got, want := core.take(), []string{"POST /v1/plugins/ownertok/import owner", "GET /v1/plugins/ownertok/status owner", "GET /v1/status owner", "POST /v1/plugins/ownertok/import owner"}; !slices.Equal(got, want) {
		t.Errorf("service proxy: the core saw %q, want %q", got, want)
	}

	// A core answering a redirect, through the real service proxy, which
	// passes it on: the CLI follows it to no one.
	elsewhere, _, elsewhereAddr := serveFakeCore(t, cs, ns, ip)
	core.mu.Lock()
	core.redirect = "http://" + elsewhereAddr
	core.mu.Unlock()
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "ownertok", file), ExitFailure, "answered 302", "never follows")
	core.mu.Lock()
	core.redirect = ""
	core.mu.Unlock()
	if got, want := core.take(), []string{"POST /v1/plugins/ownertok/import redirected"}; !slices.Equal(got, want) {
		t.Errorf("redirecting core: saw %q, want %q", got, want)
	}
	if got := elsewhere.take(); len(got) != 0 {
		t.Errorf("the address redirected to received %q", got)
	}

	// Refusals of the owner's token by the core are no "plugin refused the file".
	expect(t, openfief(t, k, runOpts{}, "plugin", "import", "ownertok", file, "--core-url", direct+"/refuse"), ExitFailure,
		"openfief-core refused the owner's token (403): NotOwner")

	// Who may not mint the owner's token.
	mallory := k.asUser(t, "mallory")
	r := openfief(t, mallory, runOpts{}, "plugin", "import", "ownertok", file)
	expect(t, r, ExitFailure, "you may not create tokens for serviceaccount openfief/openfief-owner", "bind Role openfief-owner (namespace openfief)")
	r = openfief(t, mallory, runOpts{}, "plugin", "import", "ownertok", file, "--core-url", direct)
	expect(t, r, ExitFailure, "you may not create tokens for serviceaccount openfief/openfief-owner")
	if got := core.take(); len(got) != 0 {
		t.Errorf("without a token the CLI still called the core: %q", got)
	}
	testutil.EnsureNamespaces(t, cs, "no-owner")
	expect(t, openfief(t, k, runOpts{}, "-n", "no-owner", "plugin", "import", "ownertok", file, "--core-url", direct),
		ExitFailure, "serviceaccount no-owner/openfief-owner, the owner's credential for openfief-core, does not exist")
}
