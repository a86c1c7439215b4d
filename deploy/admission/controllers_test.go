//go:build cluster

package admission

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/operator/operatortest"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
	"github.com/arkadiuss/openfief/internal/trust"
)

// signedImages stands in for the registry: every image is signed by a
// trusted signer. The signature path is tested in internal/trust.
type signedImages struct{}

func (signedImages) Check(context.Context, plugins.ImageRef, *plugins.Manifest) trust.Verification {
	return trust.Verification{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedByTrustedSigner, Message: "signed (test)", Signer: "test"}
}

// rejectionCounter counts the operator's requests the API server refused
// with 403 Forbidden.
type rejectionCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (r *rejectionCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		r.mu.Lock()
		r.n++
		r.mu.Unlock()
	}
	return resp, err
}

func (r *rejectionCounter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// startOperatorAs runs the operator, built as cmd/operator builds it, as the
// operator's ServiceAccount with the Role of deploy/operator, until the test
// ends.
func startOperatorAs(t *testing.T, env *admissionEnv) *rejectionCounter {
	t.Helper()
	rejections := &rejectionCounter{}
	o := operator.DefaultOptions()
	o.Cluster.Gate.Image = testutil.GateImage
	o.Images = signedImages{}
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.LeaderElection = "0", "", false
	operatortest.Start(t, env.cluster.Config, operatortest.Options{
		Manager:   o.ManagerOptions,
		Setup:     func(mgr ctrl.Manager) error { _, err := operator.AddToManager(mgr, o); return err },
		As:        asOperator,
		Transport: func(rt http.RoundTripper) http.RoundTripper { rejections.next = rt; return rejections },
	})
	return rejections
}

// ensureService creates a Service in openfief, as the cluster admin, selecting
// app=<name>.
func ensureService(t *testing.T, cl client.Client, name, port string, target int32) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: port, Port: 80, TargetPort: intstr.FromInt32(target), Protocol: corev1.ProtocolTCP}},
		},
	}
	if err := cl.Create(context.Background(), svc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestOperatorAppliesPassAdmissionPolicy runs the real operator as its
// ServiceAccount under the policy: its server-side applies of a plugin's
// Deployment (serviceAccountName plugin-<name>), of an upgrade and of a
// ClusterUnavailable episode (scaled to zero and back) pass; another
// identity can add nothing to that Deployment, so nothing another manager
// owns can survive the operator's re-applies, nor change the verified-version
// record in its pod template.
func TestOperatorAppliesPassAdmissionPolicy(t *testing.T) {
	env := admissionCluster(t)
	admin := env.as(t, asAdmin)
	ensureService(t, admin, operator.DefaultCoreService, operator.DefaultCorePort, 9090)
	ensureService(t, admin, operator.DefaultProxyService, operator.DefaultProxyPort, 3128)
	rejections := startOperatorAs(t, env)

	p := testutil.MakePlugin("admitted", testutil.Image("admitted-1")).Egress("api.nbp.pl").Obj()
	for _, obj := range []client.Object{p, testutil.GrantFor(p).Obj()} {
		if err := admin.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	deploymentRuns := func(image string) *appsv1.Deployment {
		t.Helper()
		var d appsv1.Deployment
		testutil.Eventually(t, 60*time.Second, "the operator's Deployment running "+image, func() (bool, string) {
			if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "plugin-admitted"}, &d); err != nil {
				return false, err.Error()
			}
			var pl v1alpha1.Plugin
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(p), &pl); err != nil {
				return false, err.Error()
			}
			ready := apimeta.FindStatusCondition(pl.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || strings.Contains(ready.Message, "failed") {
				return false, describeCondition(ready)
			}
			spec := d.Spec.Template.Spec
			return spec.ServiceAccountName == "plugin-admitted" && len(spec.Containers) == 1 && spec.Containers[0].Image == image,
				spec.ServiceAccountName + " " + describeCondition(ready)
		})
		return &d
	}
	deploymentRuns(p.Spec.Image)

	// Another field manager's additions are refused before the operator's
	// re-apply could keep them.
	sidecar := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "plugin-admitted", "namespace": ns},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "sidecar", "image": otherImage}},
		}}},
	}}
	err := env.as(t, asMallory).Apply(context.Background(), client.ApplyConfigurationFromUnstructured(sidecar), client.FieldOwner("mallory"))
	expectRule(t, asMallory, err, 4)
	err = tryUpdate(t, env.as(t, asMallory), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "plugin-admitted", Namespace: ns}}, "",
		func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Env = append(d.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "EXTRA", Value: "1"})
		})
	expectRule(t, asMallory, err, 4)

	// An upgrade is the operator's own update of the pod template.
	next := testutil.Image("admitted-2")
	var pl v1alpha1.Plugin
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(p), &pl); err != nil {
		t.Fatal(err)
	}
	pl.Spec.Image = next
	if err := admin.Update(context.Background(), &pl); err != nil {
		t.Fatal(err)
	}
	d := deploymentRuns(next)

	// The record of the verified version that fail static trusts (OF-2) is
	// in the pod template, where no one else may write.
	if d.Spec.Template.Annotations[operator.AnnotationVerifiedVersion] == "" {
		t.Errorf("the operator's Deployment has no %s annotation", operator.AnnotationVerifiedVersion)
	}
	err = tryUpdate(t, env.as(t, asMallory), d, "", func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations[operator.AnnotationVerifiedVersion] = `{"image":"` + otherImage + `"}`
	})
	expectRule(t, asMallory, err, 4)

	// A ClusterUnavailable episode: the operator scales the Deployment to
	// zero and back, as itself.
	var core corev1.Service
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: operator.DefaultCoreService}, &core); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(context.Background(), &core); err != nil {
		t.Fatal(err)
	}
	replicas := func(want int32) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, fmt.Sprintf("the Deployment at %d replicas", want), func() (bool, string) {
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
				return false, err.Error()
			}
			return d.Spec.Replicas != nil && *d.Spec.Replicas == want, fmt.Sprint(ptr.Deref(d.Spec.Replicas, -1))
		})
	}
	replicas(0)
	ensureService(t, admin, operator.DefaultCoreService, operator.DefaultCorePort, 9090)
	replicas(1)
	if n := rejections.count(); n != 0 {
		t.Errorf("the API server refused %d of the operator's requests", n)
	}
}

func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return "no Ready condition"
	}
	return c.Reason + ": " + c.Message
}

// startControllerManager runs kube-controller-manager as real clusters do,
// with --use-service-account-credentials=true, so each controller acts as its
// own ServiceAccount in kube-system; internal/devcluster runs it without, as
// the cluster admin. Only the controllers the policies concern run, the
// token controller that fills token Secrets among them.
func startControllerManager(t *testing.T, c *devcluster.Cluster) {
	t.Helper()
	bin, err := devcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	testutil.StartProcess(t, filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+c.KubeconfigPath,
		"--authentication-kubeconfig="+c.KubeconfigPath,
		"--authorization-kubeconfig="+c.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(c.Dir, "apiserver", "sa-signer.key"),
		"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,validatingadmissionpolicy-status-controller,serviceaccount-token-controller",
	)
}

// TestControllersPassAdmissionPolicy runs the real Deployment, ReplicaSet and
// garbage collector controllers under the policy with the identities real
// clusters give them: the operator's plugin Deployment and the admin's
// operator Deployment (deploy/operator) get their ReplicaSets and pods, and
// a foreground deletion, where the garbage collector removes the owner's
// finalizer, completes. The policies' expressions type-check against every
// kind they match.
func TestControllersPassAdmissionPolicy(t *testing.T) {
	env := admissionCluster(t)
	startControllerManager(t, env.cluster)
	admin := env.as(t, asAdmin)
	ctx := context.Background()

	d := deployment("plugin-kcm", "plugin-kcm", map[string]string{pluginLabel: "kcm"})
	env.createReal(t, asOperator, d)
	podsOf := func(app string) (int, string) {
		var pods corev1.PodList
		if err := admin.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return 0, err.Error()
		}
		var rs appsv1.ReplicaSetList
		if err := admin.List(ctx, &rs, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return 0, err.Error()
		}
		return len(pods.Items), describeReplicaSets(rs.Items)
	}
	testutil.Eventually(t, 90*time.Second, "a pod of the operator's plugin Deployment", func() (bool, string) {
		n, state := podsOf("plugin-kcm")
		return n == 1, state
	})
	// The controllers acted as their own ServiceAccounts, which the
	// controller manager creates in kube-system to request their tokens.
	for _, sa := range []string{"deployment-controller", "replicaset-controller"} {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: sa}, &corev1.ServiceAccount{}); err != nil {
			t.Errorf("ServiceAccount kube-system/%s: %v", sa, err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "a pod of the admin's openfief-operator Deployment", func() (bool, string) {
		var pods corev1.PodList
		if err := admin.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "openfief-operator"}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 1, "no pod"
	})

	if err := admin.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, "the foreground deletion to complete", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})
		n, state := podsOf("plugin-kcm")
		return apierrors.IsNotFound(err) && n == 0, state
	})

	// A token Secret outside openfief naming openfief-operator (the policy
	// does not act there) gets a token of the ServiceAccount of that name in
	// its own namespace, never of openfief's: the controller looks the
	// account up in the Secret's namespace.
	testutil.EnsureNamespaces(t, env.clientset(t, asAdmin), otherNS)
	testutil.EnsureServiceAccount(t, env.clientset(t, asAdmin), otherNS, "openfief-operator")
	secret := tokenSecret(otherNS, "operator-token", "openfief-operator")
	if err := admin.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var token []byte
	testutil.Eventually(t, 30*time.Second, "the token controller to fill the Secret", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return false, err.Error()
		}
		token = secret.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0, "no token yet"
	})
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(token)}}
	if err := admin.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + otherNS + ":openfief-operator"; !review.Status.Authenticated || review.Status.User.Username != want {
		t.Errorf("the token from a Secret in %s is %q (authenticated %v), want %s", otherNS, review.Status.User.Username, review.Status.Authenticated, want)
	}

	for _, name := range []string{policyName, tokensPolicy} {
		testutil.Eventually(t, 30*time.Second, name+"'s type checking", func() (bool, string) {
			var vap admissionregistrationv1.ValidatingAdmissionPolicy
			if err := admin.Get(ctx, client.ObjectKey{Name: name}, &vap); err != nil {
				return false, err.Error()
			}
			tc := vap.Status.TypeChecking
			if vap.Status.ObservedGeneration != vap.Generation || tc == nil {
				return false, "not checked yet"
			}
			if len(tc.ExpressionWarnings) > 0 {
				t.Fatalf("%s: type-checking warnings: %+v", name, tc.ExpressionWarnings)
			}
			return true, ""
		})
	}
}

func describeReplicaSets(items []appsv1.ReplicaSet) string {
	if len(items) == 0 {
		return "no ReplicaSet"
	}
	var out []string
	for _, rs := range items {
		msg := rs.Name
		for _, c := range rs.Status.Conditions {
			msg += " " + string(c.Type) + ": " + c.Message
		}
		out = append(out, msg)
	}
	return strings.Join(out, "; ")
}
