package check

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// MinKubernetes is the oldest Kubernetes the platform runs on: 1.30, the
// first release that serves admissionregistration.k8s.io/v1
// ValidatingAdmissionPolicy (GA), which deploy/admission applies and
// which, with its CEL authorizer checks, is what keeps other identities
// from running pods as the platform's or a plugin's (OF-28).
const MinKubernetes = "v1.30.0"

// installHint is the fix for what a platform install creates.
const installHint = "install the platform: openfief platform install --overlay DIR (docs/operator.md, Install)"

// KubernetesVersion decides the version check from the server's
// gitVersion (such as "v1.34.1" or "v1.31.2-gke.100"), or the error of
// reading it.
func KubernetesVersion(gitVersion string, err error) Result {
	const name = "version"
	if err != nil {
		return fail(GroupKubernetes, name, "cannot read the server's version: "+err.Error(), "check the kubeconfig, --context and that the API server is reachable")
	}
	v := gitVersion
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	if !semver.IsValid(v) {
		return fail(GroupKubernetes, name, fmt.Sprintf("%s is not a version this can compare with %s", gitVersion, MinKubernetes), "run Kubernetes "+MinKubernetes+" or later")
	}
	if semver.Compare(semver.MajorMinor(v), semver.MajorMinor(MinKubernetes)) < 0 {
		return fail(GroupKubernetes, name, fmt.Sprintf("%s is older than %s, the first with ValidatingAdmissionPolicy v1", gitVersion, MinKubernetes),
			"upgrade the cluster to Kubernetes "+MinKubernetes+" or later")
	}
	return ok(GroupKubernetes, name, fmt.Sprintf("%s (at least %s)", gitVersion, MinKubernetes))
}

// API is an API resource the platform uses.
type API struct {
	// GroupVersion is the group and version it is served at ("v1" for
	// the core group).
	GroupVersion string
	// Resource is its name, with a subresource after a slash.
	Resource string
	// Kind names it for people.
	Kind string
	// Verb is a verb the resource must support.
	Verb string
	// Why says what the platform needs it for.
	Why string
}

// Name is the check's name.
func (a API) Name() string { return "api " + a.Resource + " " + a.GroupVersion }

// RequiredAPIs are the APIs the platform needs beyond those every cluster
// serves.
var RequiredAPIs = []API{
	{GroupVersion: "admissionregistration.k8s.io/v1", Resource: "validatingadmissionpolicies", Kind: "ValidatingAdmissionPolicy", Verb: "create",
		Why: "the admission policy that reserves plugin and platform identities"},
	{GroupVersion: "admissionregistration.k8s.io/v1", Resource: "validatingadmissionpolicybindings", Kind: "ValidatingAdmissionPolicyBinding", Verb: "create",
		Why: "binds that policy"},
	{GroupVersion: "networking.k8s.io/v1", Resource: "networkpolicies", Kind: "NetworkPolicy", Verb: "create",
		Why: "each plugin's isolation"},
	{GroupVersion: "v1", Resource: "serviceaccounts/token", Kind: "TokenRequest", Verb: "create",
		Why: "the short-lived tokens of plugins, the core and the owner"},
}

// APIServed decides whether api is served, from the discovery list of its
// group and version (nil with a not-found error when the group version is
// not served at all).
func APIServed(api API, list *metav1.APIResourceList, err error) Result {
	hint := fmt.Sprintf("run Kubernetes %s or later with %s enabled (needed for %s)", MinKubernetes, api.GroupVersion, api.Why)
	if err != nil && !apierrors.IsNotFound(err) {
		return fail(GroupKubernetes, api.Name(), "cannot read the API server's discovery: "+err.Error(), "check that the API server is reachable")
	}
	if list != nil {
		for _, r := range list.APIResources {
			if r.Name == api.Resource && slices.Contains(r.Verbs, api.Verb) {
				return ok(GroupKubernetes, api.Name(), api.Kind)
			}
		}
	}
	return fail(GroupKubernetes, api.Name(), fmt.Sprintf("%s is not served (%s %s)", api.Kind, api.GroupVersion, api.Resource), hint)
}

// CRDName is the check's name of a CRD.
func CRDName(crd string) string { return "crd " + crd }

// CRD decides the check of one of the platform's CRDs: Established and
// serving version, the one this CLI speaks. Before an install (pre) an
// absent CRD passes, since the install creates it.
func CRD(name, version string, crd *apiextensionsv1.CustomResourceDefinition, err error, pre bool) Result {
	n := CRDName(name)
	switch {
	case apierrors.IsNotFound(err) && pre:
		return ok(GroupKubernetes, n, "absent: the install creates it")
	case apierrors.IsNotFound(err):
		return fail(GroupKubernetes, n, "not found", installHint)
	case err != nil:
		return fail(GroupKubernetes, n, "cannot read it: "+err.Error(), "you need get on customresourcedefinitions.apiextensions.k8s.io")
	}
	served := false
	var have []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			have = append(have, v.Name)
		}
		served = served || (v.Name == version && v.Served)
	}
	if !served {
		return fail(GroupKubernetes, n, fmt.Sprintf("serves %s, not %s, which this openfief speaks", strings.Join(have, ", "), version),
			"install the platform release that matches this openfief (openfief platform upgrade --overlay DIR), or use the openfief of the installed release")
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return ok(GroupKubernetes, n, version+", Established")
		}
	}
	return fail(GroupKubernetes, n, version+" is not Established", "kubectl describe crd "+name+" shows why (a name conflict, a pending update)")
}

// Namespace decides, before an install, whether the platform namespace
// leaves room for it: absent (the install creates it), or present with
// nothing of a platform in it but what an uninstall keeps. A platform the
// command installed refuses (use upgrade); platform Deployments not
// labelled as the command's are a foreign install, which the install would
// take over. err is a failure to read the namespace or, when it exists,
// to list what it holds: the check fails then.
func Namespace(exists bool, err error, owned []string, installedVersion string, foreign []string) Result {
	const name = "namespace " + plugins.Namespace
	switch {
	case err != nil:
		return fail(GroupInstall, name, "cannot read it: "+err.Error(), "you need get on namespaces")
	case !exists:
		return ok(GroupInstall, name, "absent: the install creates it")
	case len(owned) > 0:
		return fail(GroupInstall, name, "the platform is already installed (version "+installedVersion+")", "use openfief platform upgrade --overlay DIR, or openfief check without --pre")
	case len(foreign) > 0:
		return fail(GroupInstall, name, "holds platform Deployments not installed by openfief platform: "+strings.Join(foreign, ", "),
			"remove that install (kubectl delete -k deploy/...), or install into another cluster")
	}
	return ok(GroupInstall, name, "exists and holds no platform: the install uses it")
}

// AccessName is the check's name of the permissions on one resource.
func AccessName(resource string) string { return "may write " + resource }

// Access decides whether the admin may do every verb the install does on
// resource: verbs maps each verb to whether a SelfSubjectAccessReview
// allowed it; err is the first review that could not be made.
func Access(resource string, verbs map[string]bool, err error) Result {
	n := AccessName(resource)
	if err != nil {
		return fail(GroupInstall, n, "cannot ask the API server: "+err.Error(), "check that the API server is reachable")
	}
	var missing []string
	for v, allowed := range verbs {
		if !allowed {
			missing = append(missing, v)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		return fail(GroupInstall, n, "not allowed to "+strings.Join(missing, ", "), "run the install as a cluster admin, or have one bind you a role that allows it")
	}
	all := make([]string, 0, len(verbs))
	for v := range verbs {
		all = append(all, v)
	}
	slices.Sort(all)
	return ok(GroupInstall, n, strings.Join(all, ", "))
}

// Installed decides whether the platform is installed, from its version
// ("" when none) and whether platform.Installed held.
func Installed(installed bool, version string, err error) Result {
	const name = "installed"
	switch {
	case err != nil:
		return fail(GroupPlatform, name, "cannot list the platform's objects: "+err.Error(), "you need list on the platform's kinds in namespace "+plugins.Namespace)
	case !installed:
		return fail(GroupPlatform, name, "the platform is not installed", installHint+"; openfief check --pre says whether an install can go ahead")
	}
	return ok(GroupPlatform, name, "version "+version)
}

// DeploymentFacts is what the Deployment check reads of one platform
// Deployment: the Deployment itself and its pods.
type DeploymentFacts struct {
	Deployment *appsv1.Deployment
	Pods       []corev1.Pod
}

// DeploymentName is the check's name of a platform Deployment.
func DeploymentName(name string) string { return "deployment " + name }

// Deployment decides one platform Deployment: Available
// (platform.DeploymentAvailable: the rollout complete), every image pinned
// by digest as a release overlay pins it, and every live pod running
// exactly the template's images.
func Deployment(f DeploymentFacts) Result {
	d := f.Deployment
	n := DeploymentName(d.Name)
	describe := "kubectl -n " + d.Namespace + " describe deployment " + d.Name + " (or openfief platform status)"
	want := ptr.Deref(d.Spec.Replicas, 1)
	if want == 0 {
		return fail(GroupPlatform, n, "scaled to 0 replicas: nothing runs it", "kubectl -n "+d.Namespace+" scale deployment "+d.Name+" --replicas=1 (or openfief platform upgrade --overlay DIR)")
	}
	if !platform.DeploymentAvailable(d) {
		reason := fmt.Sprintf("not Available: %d/%d available, %d updated", d.Status.AvailableReplicas, want, d.Status.UpdatedReplicas)
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status != corev1.ConditionTrue {
				reason += fmt.Sprintf(", Available=%s (%s)", c.Status, c.Reason)
			}
		}
		return fail(GroupPlatform, n, reason, describe)
	}
	pinned := map[string]string{}
	var images []string
	for _, c := range d.Spec.Template.Spec.Containers {
		pinned[c.Name] = c.Image
		images = append(images, c.Image)
		if _, err := plugins.ParseImageRef(c.Image); err != nil {
			return fail(GroupPlatform, n, fmt.Sprintf("container %s runs %s, not pinned by digest", c.Name, c.Image),
				"install from a release overlay (make release-overlay), which pins every image by digest")
		}
	}
	for _, p := range f.Pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			if pinned[c.Name] != c.Image {
				return fail(GroupPlatform, n, fmt.Sprintf("pod %s container %s runs %s, the Deployment pins %s", p.Name, c.Name, c.Image, pinned[c.Name]),
					"wait for the rollout, or delete the pod; "+describe)
			}
		}
	}
	version := d.Labels[platform.LabelVersion]
	if version == "" {
		version = "no version label"
	}
	return ok(GroupPlatform, n, fmt.Sprintf("Available %d/%d, %s, %s", d.Status.AvailableReplicas, want, version, strings.Join(images, ", ")))
}

// Admission decides the admission policy checks from the platform's
// bindings: one result per binding (its policy present, validation
// actions including Deny), and a failure when there is none.
func Admission(bindings []platform.Binding) []Result {
	if len(bindings) == 0 {
		return []Result{fail(GroupPlatform, "admission policy bound", "no ValidatingAdmissionPolicyBinding of the platform: nothing stops other identities from running pods as the platform's or a plugin's",
			"install the platform from a release overlay, which holds deploy/admission")}
	}
	var out []Result
	for _, b := range bindings {
		n := "admission binding " + b.Name
		switch {
		case !b.PolicyFound:
			out = append(out, fail(GroupPlatform, n, "binds policy "+b.Policy+", which does not exist", "openfief platform upgrade --overlay DIR with the release overlay puts it back"))
		case !slices.Contains(strings.Split(b.Actions, ","), "Deny"):
			out = append(out, fail(GroupPlatform, n, "binds policy "+b.Policy+" with actions "+b.Actions+", without Deny: violations are let through",
				"restore validationActions [Deny]: openfief platform upgrade --overlay DIR"))
		default:
			out = append(out, ok(GroupPlatform, n, "policy "+b.Policy+", "+b.Actions))
		}
	}
	return out
}

// ImageSignatures is the check of the platform images' signatures, not
// made yet: a warning that says so.
func ImageSignatures() Result {
	return warn(GroupPlatform, "image signatures", "not checked yet: the platform's images are not verified against the release signer by this command",
		"verify them yourself: cosign verify each image of openfief platform status against the release workflow's identity (docs/operator.md)")
}

// ServedKeys is what the API server serves now as its ServiceAccount
// token issuer and signing keys.
type ServedKeys struct {
	Issuer string
	JWKS   []byte
}

// TokenKeysName is the name of the signing keys check.
const TokenKeysName = "signing keys " + plugins.TokenKeysConfigMap

// TokenKeys decides whether the ConfigMap the operator publishes the
// cluster's token signing keys in is present and fresh (D-59): fresh means
// it holds the issuer and, in the operator's canonical form, exactly the
// keys the API server serves now. The operator publishes them at start,
// every --signing-keys-refresh (default 10 minutes) and whenever the
// ConfigMap changes, so after the API server rotates its keys a stale
// ConfigMap lasts at most that long; plugins cannot verify the core's
// tokens signed by a key missing there. When the API server's keys cannot
// be read (servedErr, for instance no right to its discovery endpoints),
// the ConfigMap is only validated, with a warning.
func TokenKeys(cm *corev1.ConfigMap, err error, served ServedKeys, servedErr error) Result {
	n := TokenKeysName
	restart := "the operator publishes it at start and every 10 minutes: check that openfief-operator runs (kubectl -n " + plugins.Namespace + " logs deploy/openfief-operator)"
	switch {
	case apierrors.IsNotFound(err):
		return fail(GroupRuntime, n, "ConfigMap "+plugins.Namespace+"/"+plugins.TokenKeysConfigMap+" not found", restart)
	case err != nil:
		return fail(GroupRuntime, n, "cannot read it: "+err.Error(), "you need get on configmaps in namespace "+plugins.Namespace)
	}
	keys, perr := plugins.ParseTokenKeys([]byte(cm.Data[plugins.TokenKeysJWKSKey]))
	issuer := cm.Data[plugins.TokenKeysIssuerKey]
	switch {
	case perr != nil:
		return fail(GroupRuntime, n, "its "+plugins.TokenKeysJWKSKey+" is not a valid key set: "+perr.Error(), restart)
	case plugins.CheckIssuer(issuer) != nil:
		return fail(GroupRuntime, n, "its issuer is not valid: "+plugins.CheckIssuer(issuer).Error(), restart)
	case servedErr != nil:
		return warn(GroupRuntime, n, fmt.Sprintf("%s of issuer %s, not compared with the API server's: %s", count(keys.Len(), "key"), issuer, servedErr.Error()),
			"compare as someone allowed to read /openid/v1/jwks (a cluster admin)")
	}
	now, nerr := plugins.ParseTokenKeys(served.JWKS)
	switch {
	case nerr != nil:
		return warn(GroupRuntime, n, "the API server's own keys do not validate: "+nerr.Error(), "the operator publishes nothing it cannot validate; check the API server's --service-account-* flags")
	case served.Issuer != issuer:
		return fail(GroupRuntime, n, fmt.Sprintf("stale: publishes issuer %s, the API server names %s", issuer, served.Issuer), restart+"; run the check again after that")
	case string(now.JWKS()) != string(keys.JWKS()):
		return fail(GroupRuntime, n, fmt.Sprintf("stale: publishes %s, not the %s the API server serves now", count(keys.Len(), "key"), count(now.Len(), "key")), restart+"; run the check again after that")
	}
	return ok(GroupRuntime, n, fmt.Sprintf("%s of issuer %s, as the API server serves them", count(keys.Len(), "key"), issuer))
}

// AllowListName is the name of the allow-list check.
const AllowListName = "allow-list " + plugins.AllowListConfigMap

// AllowList decides whether the egress proxy's allow-list ConfigMap, which
// the operator keeps, is there and readable.
func AllowList(cm *corev1.ConfigMap, err error) Result {
	switch {
	case apierrors.IsNotFound(err):
		return fail(GroupRuntime, AllowListName, "ConfigMap "+plugins.Namespace+"/"+plugins.AllowListConfigMap+" not found",
			"the operator creates it at start: check that openfief-operator runs")
	case err != nil:
		return fail(GroupRuntime, AllowListName, "cannot read it: "+err.Error(), "you need get on configmaps in namespace "+plugins.Namespace)
	}
	return ok(GroupRuntime, AllowListName, fmt.Sprintf("readable, %s", count(len(cm.Data), "plugin's list")))
}

// CoreName and CoreStoreName are the names of the core's checks.
const (
	CoreName      = "core answers"
	CoreStoreName = "core store"
)

// Core decides whether openfief-core answered its health endpoint through
// the API server's service proxy (err is nil when it answered 200).
func Core(err error) Result {
	if err != nil {
		return fail(GroupRuntime, CoreName, err.Error(),
			"kubectl -n "+plugins.Namespace+" describe deployment openfief-core and its pods' logs; the owner API is reached through the API server's service proxy (docs/core.md)")
	}
	return ok(GroupRuntime, CoreName, "/healthz ok, through the API server's service proxy")
}

// CoreStore decides whether the core's store answers. The core has no
// store-health endpoint: its owner API's status of every instance reads
// the store, so a 200 there, with the owner's token, is the store
// answering. coreErr says the core itself did not answer: the store is not
// checked then.
func CoreStore(coreErr, err error) Result {
	switch {
	case coreErr != nil:
		return fail(GroupRuntime, CoreStoreName, "not checked: the core does not answer", "fix the core first")
	case err != nil:
		return fail(GroupRuntime, CoreStoreName, err.Error(),
			"the owner API's status reads the store: see the core's logs (kubectl -n "+plugins.Namespace+" logs deploy/openfief-core); minting the owner's token needs Role "+"openfief-owner")
	}
	return ok(GroupRuntime, CoreStoreName, "the owner API's status read the store")
}

// count is n with noun, plural when n is not 1 ("1 key", "2 keys").
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "'s list") {
		return fmt.Sprintf("%d %s", n, strings.TrimSuffix(noun, "'s list")+"s' lists")
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
