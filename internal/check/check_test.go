package check

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/testutil"
)

var (
	errDown      = errors.New("connection refused")
	notFound     = apierrors.NewNotFound(schema.GroupResource{Resource: "things"}, "x")
	forbiddenErr = apierrors.NewForbidden(schema.GroupResource{Resource: "things"}, "x", errors.New("no"))
)

// short is a result without its hint, for tables that only care about the
// outcome and the reason.
type short struct {
	Status Status
	Reason string
}

func shorten(r Result) short { return short{r.Status, r.Reason} }

func TestKubernetesVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		git  string
		err  error
		want short
	}{
		"the minimum":           {git: "v1.30.0", want: short{OK, "v1.30.0 (at least v1.30.0)"}},
		"newer, a vendor build": {git: "v1.34.2-gke.1200", want: short{OK, "v1.34.2-gke.1200 (at least v1.30.0)"}},
		"with build metadata":   {git: "v1.31.4+k3s1", want: short{OK, "v1.31.4+k3s1 (at least v1.30.0)"}},
		"one minor too old":     {git: "v1.29.9", want: short{Fail, "v1.29.9 is older than v1.30.0, the first with ValidatingAdmissionPolicy v1"}},
		"not a version":         {git: "banana", want: short{Fail, "banana is not a version this can compare with v1.30.0"}},
		"unreachable":           {err: errDown, want: short{Fail, "cannot read the server's version: connection refused"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, shorten(KubernetesVersion(tc.git, tc.err))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPIServed(t *testing.T) {
	token := RequiredAPIs[3]
	list := func(rs ...metav1.APIResource) *metav1.APIResourceList {
		return &metav1.APIResourceList{APIResources: rs}
	}
	for name, tc := range map[string]struct {
		list *metav1.APIResourceList
		err  error
		want Status
	}{
		"served with create":          {list: list(metav1.APIResource{Name: "serviceaccounts"}, metav1.APIResource{Name: "serviceaccounts/token", Verbs: []string{"create"}}), want: OK},
		"subresource absent":          {list: list(metav1.APIResource{Name: "serviceaccounts", Verbs: []string{"create"}}), want: Fail},
		"served without the verb":     {list: list(metav1.APIResource{Name: "serviceaccounts/token", Verbs: []string{"get"}}), want: Fail},
		"group version not served":    {err: notFound, want: Fail},
		"discovery cannot be reached": {err: errDown, want: Fail},
	} {
		t.Run(name, func(t *testing.T) {
			if got := APIServed(token, tc.list, tc.err); got.Status != tc.want || got.Name != "api serviceaccounts/token v1" {
				t.Errorf("got %+v, want status %s", got, tc.want)
			}
		})
	}
}

func TestCRD(t *testing.T) {
	crd := func(established bool, versions ...string) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{}
		for _, v := range versions {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true})
		}
		status := apiextensionsv1.ConditionFalse
		if established {
			status = apiextensionsv1.ConditionTrue
		}
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: status}}
		return c
	}
	for name, tc := range map[string]struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		err  error
		pre  bool
		want short
	}{
		"established at the version": {crd: crd(true, "v1alpha1"), want: short{OK, "v1alpha1, Established"}},
		"not established":            {crd: crd(false, "v1alpha1"), want: short{Fail, "v1alpha1 is not Established"}},
		"another version only":       {crd: crd(true, "v1beta1", "v2"), want: short{Fail, "serves v1beta1, v2, not v1alpha1, which this openfief speaks"}},
		"absent after install":       {err: notFound, want: short{Fail, "not found"}},
		"absent before install":      {err: notFound, pre: true, want: short{OK, "absent: the install creates it"}},
		"present before install":     {crd: crd(true, "v1alpha1"), pre: true, want: short{OK, "v1alpha1, Established"}},
		"wrong version before":       {crd: crd(true, "v2"), pre: true, want: short{Fail, "serves v2, not v1alpha1, which this openfief speaks"}},
		"forbidden":                  {err: forbiddenErr, want: short{Fail, "cannot read it: " + forbiddenErr.Error()}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, shorten(CRD("plugins.openfief.io", "v1alpha1", tc.crd, tc.err, tc.pre))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamespace(t *testing.T) {
	for name, tc := range map[string]struct {
		exists  bool
		err     error
		owned   []string
		foreign []string
		want    short
	}{
		"absent":            {want: short{OK, "absent: the install creates it"}},
		"kept data only":    {exists: true, want: short{OK, "exists and holds no platform: the install uses it"}},
		"already installed": {exists: true, owned: []string{"v0.1.0"}, want: short{Fail, "the platform is already installed (version v0.1.0)"}},
		"foreign install":   {exists: true, foreign: []string{"openfief-core", "openfief-operator"}, want: short{Fail, "holds platform Deployments not installed by openfief platform: openfief-core, openfief-operator"}},
		"unreadable":        {err: forbiddenErr, want: short{Fail, "cannot read it: " + forbiddenErr.Error()}},
		"contents unknown":  {exists: true, err: errDown, want: short{Fail, "cannot read it: connection refused"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, shorten(Namespace(tc.exists, tc.err, tc.owned, "v0.1.0", tc.foreign))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAccess(t *testing.T) {
	for name, tc := range map[string]struct {
		verbs map[string]bool
		err   error
		want  short
	}{
		"every verb":     {verbs: map[string]bool{"patch": true, "create": true, "list": true}, want: short{OK, "create, list, patch"}},
		"some missing":   {verbs: map[string]bool{"patch": false, "create": true, "list": false}, want: short{Fail, "not allowed to list, patch"}},
		"review refused": {verbs: map[string]bool{"create": false}, err: errDown, want: short{Fail, "cannot ask the API server: connection refused"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, shorten(Access("roles.rbac.authorization.k8s.io", tc.verbs, tc.err))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// deployment is a platform Deployment whose rollout is complete, with
// replicas pods running image; change modifies it.
func deployment(replicas int32, image string, change func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openfief", Name: "openfief-core", Generation: 2, Labels: map[string]string{platform.LabelVersion: "v0.2.0"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "core", Image: image}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: replicas, AvailableReplicas: replicas,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}
	if change != nil {
		change(d)
	}
	return d
}

func pod(name, image string, deleting bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "core", Image: image}}}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func TestDeployment(t *testing.T) {
	pinned := testutil.Image("core")
	other := testutil.Image("core-old")
	for name, tc := range map[string]struct {
		d    *appsv1.Deployment
		pods []corev1.Pod
		want short
	}{
		"available, pods on the pinned image": {d: deployment(2, pinned, nil), pods: []corev1.Pod{pod("a", pinned, false), pod("b", pinned, false)},
			want: short{OK, "Available 2/2, v0.2.0, " + pinned}},
		"a terminating pod of the old image is ignored": {d: deployment(1, pinned, nil), pods: []corev1.Pod{pod("a", pinned, false), pod("old", other, true)},
			want: short{OK, "Available 1/1, v0.2.0, " + pinned}},
		"a live pod on another image": {d: deployment(1, pinned, nil), pods: []corev1.Pod{pod("old", other, false)},
			want: short{Fail, "pod old container core runs " + other + ", the Deployment pins " + pinned}},
		"image by tag": {d: deployment(1, "registry.example.com/openfief/core:latest", nil),
			want: short{Fail, "container core runs registry.example.com/openfief/core:latest, not pinned by digest"}},
		"scaled to zero": {d: deployment(0, pinned, nil), want: short{Fail, "scaled to 0 replicas: nothing runs it"}},
		"not available": {d: deployment(1, pinned, func(d *appsv1.Deployment) {
			d.Status.AvailableReplicas = 0
			d.Status.Conditions[0] = appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}
		}), want: short{Fail, "not Available: 0/1 available, 1 updated, Available=False (MinimumReplicasUnavailable)"}},
		"rollout not observed yet": {d: deployment(1, pinned, func(d *appsv1.Deployment) { d.Generation = 3 }),
			want: short{Fail, "not Available: 1/1 available, 1 updated"}},
		"no version label": {d: deployment(1, pinned, func(d *appsv1.Deployment) { d.Labels = nil }),
			want: short{OK, "Available 1/1, no version label, " + pinned}},
	} {
		t.Run(name, func(t *testing.T) {
			got := Deployment(DeploymentFacts{Deployment: tc.d, Pods: tc.pods})
			if diff := cmp.Diff(tc.want, shorten(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got.Name != "deployment openfief-core" || got.Group != GroupPlatform {
				t.Errorf("named %s/%s", got.Group, got.Name)
			}
		})
	}
}

func TestAdmission(t *testing.T) {
	for name, tc := range map[string]struct {
		bindings []platform.Binding
		want     []short
	}{
		"none": {want: []short{{Fail, "no ValidatingAdmissionPolicyBinding of the platform: nothing stops other identities from running pods as the platform's or a plugin's"}}},
		"bound and denying": {bindings: []platform.Binding{{Name: "b", Policy: "p", Actions: "Deny", PolicyFound: true}, {Name: "c", Policy: "q", Actions: "Audit,Deny", PolicyFound: true}},
			want: []short{{OK, "policy p, Deny"}, {OK, "policy q, Audit,Deny"}}},
		"policy missing": {bindings: []platform.Binding{{Name: "b", Policy: "p", Actions: "Deny"}}, want: []short{{Fail, "binds policy p, which does not exist"}}},
		"audit only": {bindings: []platform.Binding{{Name: "b", Policy: "p", Actions: "Audit,Warn", PolicyFound: true}},
			want: []short{{Fail, "binds policy p with actions Audit,Warn, without Deny: violations are let through"}}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []short
			for _, r := range Admission(tc.bindings) {
				got = append(got, shorten(r))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// ecJWK is an EC P-256 public key as a JWKS member list.
func ecJWK(t *testing.T, kid string) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	point, err := k.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	return `{"use":"sig","kty":"EC","kid":"` + kid + `","crv":"P-256","alg":"ES256","x":"` + b64(point[1:33]) + `","y":"` + b64(point[33:]) + `"}`
}

func TestTokenKeys(t *testing.T) {
	a, b := ecJWK(t, "a"), ecJWK(t, "b")
	set := func(keys ...string) string { return `{"keys":[` + strings.Join(keys, ",") + `]}` }
	const issuer = "https://kubernetes.default.svc"
	cm := func(jwks, iss string) *corev1.ConfigMap {
		return &corev1.ConfigMap{Data: map[string]string{"jwks.json": jwks, "issuer": iss}}
	}
	for name, tc := range map[string]struct {
		cm        *corev1.ConfigMap
		err       error
		served    ServedKeys
		servedErr error
		want      Status
		reason    string
	}{
		"fresh":                    {cm: cm(set(a, b), issuer), served: ServedKeys{issuer, []byte(set(b, a))}, want: OK, reason: "2 keys of issuer " + issuer + ", as the API server serves them"},
		"a key rotated in":         {cm: cm(set(a), issuer), served: ServedKeys{issuer, []byte(set(a, b))}, want: Fail, reason: "stale: publishes 1 key, not the 2 keys the API server serves now"},
		"another issuer":           {cm: cm(set(a), issuer), served: ServedKeys{"https://other.example", []byte(set(a))}, want: Fail, reason: "stale: publishes issuer " + issuer + ", the API server names https://other.example"},
		"absent":                   {err: notFound, want: Fail, reason: "ConfigMap openfief/openfief-sa-jwks not found"},
		"unreadable":               {err: forbiddenErr, want: Fail, reason: "cannot read it: " + forbiddenErr.Error()},
		"not a key set":            {cm: cm(`{"keys":"no"}`, issuer), want: Fail},
		"no issuer":                {cm: cm(set(a), ""), want: Fail},
		"API server's keys hidden": {cm: cm(set(a), issuer), servedErr: forbiddenErr, want: Warn, reason: "1 key of issuer " + issuer + ", not compared with the API server's: " + forbiddenErr.Error()},
	} {
		t.Run(name, func(t *testing.T) {
			got := TokenKeys(tc.cm, tc.err, tc.served, tc.servedErr)
			if got.Status != tc.want || (tc.reason != "" && got.Reason != tc.reason) {
				t.Errorf("got %s %q, want %s %q", got.Status, got.Reason, tc.want, tc.reason)
			}
			if got.Status != OK && got.Hint == "" {
				t.Errorf("a %s without a hint: %+v", got.Status, got)
			}
		})
	}
}

func TestAllowListAndCore(t *testing.T) {
	for name, tc := range map[string]struct {
		got  Result
		want short
	}{
		"allow-list readable":  {AllowList(&corev1.ConfigMap{Data: map[string]string{"fx": "a.example:443\n", "ib": ""}}, nil), short{OK, "readable, 2 plugins' lists"}},
		"allow-list one":       {AllowList(&corev1.ConfigMap{Data: map[string]string{"fx": ""}}, nil), short{OK, "readable, 1 plugin's list"}},
		"allow-list absent":    {AllowList(nil, notFound), short{Fail, "ConfigMap openfief/openfief-egress-allowlist not found"}},
		"core answers":         {Core(nil), short{OK, "/healthz ok, through the API server's service proxy"}},
		"core silent":          {Core(errDown), short{Fail, "connection refused"}},
		"store read":           {CoreStore(nil, nil), short{OK, "the owner API's status read the store"}},
		"store failing":        {CoreStore(nil, errors.New("the core answered 503: database is locked")), short{Fail, "the core answered 503: database is locked"}},
		"store, core silent":   {CoreStore(errDown, nil), short{Fail, "not checked: the core does not answer"}},
		"signatures a warning": {ImageSignatures(), short{Warn, "not checked yet: the platform's images are not verified against the release signer by this command"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, shorten(tc.got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// sample is a set of results out of order, one with hostile text.
func sample() []Result {
	return []Result{
		fail(GroupRuntime, CoreName, "no openfief-core answered (HTTP 503): \x1b[2Jgone", "look at its pods"),
		ok(GroupPlatform, "installed", "version v0.2.0"),
		ok(GroupKubernetes, "version", "v1.34.0 (at least v1.30.0)"),
		ImageSignatures(),
		ok(GroupKubernetes, "crd plugins.openfief.io", "v1alpha1, Established"),
	}
}

func TestWriteText(t *testing.T) {
	rs := sample()
	Sort(rs)
	var out bytes.Buffer
	WriteText(&out, rs)
	want := `Kubernetes
  ✔ crd plugins.openfief.io: v1alpha1, Established
  ✔ version: v1.34.0 (at least v1.30.0)

Platform
  ! image signatures: not checked yet: the platform's images are not verified against the release signer by this command
      fix: verify them yourself: cosign verify each image of openfief platform status against the release workflow's identity (docs/operator.md)
  ✔ installed: version v0.2.0

Runtime
  ✖ core answers: no openfief-core answered (HTTP 503): \x1b[2Jgone
      fix: look at its pods

✖ 1 of 5 checks failed, 1 warnings
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	out.Reset()
	passing := rs[:2]
	WriteText(&out, passing)
	if !strings.HasSuffix(out.String(), "\n✔ all 2 checks passed\n") {
		t.Errorf("summary of passing checks:\n%s", out.String())
	}
}

func TestWriteJSON(t *testing.T) {
	rs := sample()
	Sort(rs)
	var out bytes.Buffer
	if err := WriteJSON(&out, rs, true, nil); err != nil {
		t.Fatal(err)
	}
	var doc Document
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Pre || doc.Passed || len(doc.Checks) != len(rs) {
		t.Errorf("pre %v passed %v, %d checks: want pre, failed, %d", doc.Pre, doc.Passed, len(doc.Checks), len(rs))
	}
	var names []string
	for _, c := range doc.Checks {
		names = append(names, c.Group+"/"+c.Name)
	}
	if diff := cmp.Diff([]string{"kubernetes/crd plugins.openfief.io", "kubernetes/version", "platform/image signatures", "platform/installed", "runtime/core answers"}, names); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if strings.Contains(out.String(), "\x1b") || !strings.Contains(doc.Checks[4].Reason, `\x1b[2J`) {
		t.Errorf("the core's reason is not escaped: %q", doc.Checks[4].Reason)
	}
	for _, key := range []string{`"group"`, `"name"`, `"status"`, `"reason"`, `"hint"`} {
		if strings.Count(out.String(), key) != len(rs) {
			t.Errorf("key %s is not in every check:\n%s", key, out.String())
		}
	}
	var again bytes.Buffer
	shuffled := sample()
	Sort(shuffled)
	_ = WriteJSON(&again, shuffled, true, nil)
	if again.String() != out.String() {
		t.Error("the same results printed two different documents")
	}
}

func TestPassed(t *testing.T) {
	if !Passed([]Result{ok("g", "a", ""), ImageSignatures()}) {
		t.Error("a warning fails the check")
	}
	if Passed([]Result{ok("g", "a", ""), fail("g", "b", "", "")}) {
		t.Error("a failure passes")
	}
	if Passed([]Result{{Group: "g", Name: "c", Status: "unknown"}}) {
		t.Error("an unknown status passes: it must fail closed")
	}
}
