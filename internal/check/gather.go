package check

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// DefaultCallTimeout bounds each call a check makes.
const DefaultCallTimeout = 10 * time.Second

// Options are what Run reads the cluster with.
type Options struct {
	// Client reads and reviews objects.
	Client client.Client
	// Discovery reads the server's version, its APIs and its token
	// issuer's discovery documents.
	Discovery discovery.DiscoveryInterface
	// Pre runs only what an install needs (--pre).
	Pre bool
	// CoreHealth asks openfief-core's /healthz through the API server's
	// service proxy; nil when the core is not to be checked.
	CoreHealth func(context.Context) error
	// CoreStatus asks the owner API for the status of every instance,
	// which reads the core's store.
	CoreStatus func(context.Context) error
	// CallTimeout bounds each call; DefaultCallTimeout when zero.
	CallTimeout time.Duration
}

// crds are the platform's CRDs, at the version this build speaks.
var crds = []string{"plugins." + v1alpha1.GroupVersion.Group, "plugingrants." + v1alpha1.GroupVersion.Group}

// platformDeployments are the Deployments every platform install holds;
// a missing one fails even when the rest are there.
var platformDeployments = []string{"openfief-core", "openfief-egress-proxy", "openfief-operator"}

// Run makes every check o asks for and returns the results sorted (Sort).
// It never stops early: a check that cannot read what it needs fails with
// the reason, and the rest still run, each call bounded by CallTimeout.
func Run(ctx context.Context, o Options) []Result {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, o.CallTimeout) }
	var out []Result

	v, err := o.Discovery.ServerVersion()
	git := ""
	if v != nil {
		git = v.GitVersion
	}
	out = append(out, KubernetesVersion(git, err))
	lists := map[string]*metav1.APIResourceList{}
	listErrs := map[string]error{}
	for _, api := range RequiredAPIs {
		if _, seen := lists[api.GroupVersion]; !seen && listErrs[api.GroupVersion] == nil {
			lists[api.GroupVersion], listErrs[api.GroupVersion] = o.Discovery.ServerResourcesForGroupVersion(api.GroupVersion)
		}
		out = append(out, APIServed(api, lists[api.GroupVersion], listErrs[api.GroupVersion]))
	}
	for _, name := range crds {
		c, cancel := call()
		var crd apiextensionsv1.CustomResourceDefinition
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		err := o.Client.Get(c, client.ObjectKey{Name: name}, u)
		cancel()
		if err == nil {
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd)
		}
		out = append(out, CRD(name, v1alpha1.GroupVersion.Version, &crd, err, o.Pre))
	}

	c, cancel := call()
	owned, ownedErr := platform.Owned(c, o.Client)
	cancel()
	installed := ownedErr == nil && platform.Installed(owned)
	version := platform.InstalledVersion(owned)
	if o.Pre {
		out = append(out, preInstall(ctx, o, call, installed, version, ownedErr)...)
		Sort(out)
		return out
	}

	out = append(out, Installed(installed, version, ownedErr))
	if installed {
		out = append(out, deployments(o, call, owned)...)
		c, cancel := call()
		st, err := platform.ReadStatus(c, o.Client)
		cancel()
		if err != nil {
			out = append(out, fail(GroupPlatform, "admission policy bound", "cannot read the bindings: "+err.Error(), "you need list on validatingadmissionpolicybindings"))
		} else {
			out = append(out, Admission(st.Bindings)...)
		}
		out = append(out, ImageSignatures())
	}
	out = append(out, served(o, call)...)
	Sort(out)
	return out
}

// preInstall checks what an install needs beyond the APIs: room in the
// namespace and the admin's permissions on every kind it applies.
func preInstall(ctx context.Context, o Options, call func() (context.Context, context.CancelFunc), installed bool, version string, ownedErr error) []Result {
	var out []Result
	c, cancel := call()
	var ns corev1.Namespace
	err := o.Client.Get(c, client.ObjectKey{Name: plugins.Namespace}, &ns)
	cancel()
	exists := err == nil
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if err == nil && exists && ownedErr != nil {
		err = ownedErr // what it holds is unknown: fail rather than call it free
	}
	var owned, foreign []string
	if exists {
		if installed {
			owned = []string{version}
		}
		for _, name := range platformDeployments {
			c, cancel := call()
			var d appsv1.Deployment
			gerr := o.Client.Get(c, client.ObjectKey{Namespace: plugins.Namespace, Name: name}, &d)
			cancel()
			if gerr == nil && d.Labels[platform.LabelManagedBy] != platform.ValueManagedBy {
				foreign = append(foreign, name)
			}
		}
	}
	out = append(out, Namespace(exists, err, owned, version, foreign))

	mapper := o.Client.RESTMapper()
	for _, k := range platform.Kinds() {
		m, err := mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
		if err != nil {
			out = append(out, fail(GroupInstall, AccessName(k.GVK.Kind), "the API server does not serve "+k.GVK.String()+": "+err.Error(), "run Kubernetes "+MinKubernetes+" or later"))
			continue
		}
		res := m.Resource.Resource
		if m.Resource.Group != "" {
			res += "." + m.Resource.Group
		}
		verbs := map[string]bool{}
		var firstErr error
		for _, verb := range []string{"create", "patch", "list"} {
			attrs := &authorizationv1.ResourceAttributes{Verb: verb, Group: m.Resource.Group, Version: m.Resource.Version, Resource: m.Resource.Resource}
			if k.Namespaced {
				attrs.Namespace = plugins.Namespace
			}
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}
			c, cancel := context.WithTimeout(ctx, o.CallTimeout)
			err := o.Client.Create(c, review)
			cancel()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			verbs[verb] = err == nil && review.Status.Allowed
		}
		out = append(out, Access(res, verbs, firstErr))
	}
	return out
}

// deployments checks every platform Deployment: those the install holds
// and any of platformDeployments missing from it.
func deployments(o Options, call func() (context.Context, context.CancelFunc), owned []*unstructured.Unstructured) []Result {
	var out []Result
	seen := map[string]bool{}
	for _, u := range owned {
		if u.GetKind() != "Deployment" {
			continue
		}
		seen[u.GetName()] = true
		c, cancel := call()
		var d appsv1.Deployment
		err := o.Client.Get(c, client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, &d)
		if err != nil {
			cancel()
			out = append(out, fail(GroupPlatform, DeploymentName(u.GetName()), "cannot read it: "+err.Error(), "you need get on deployments in namespace "+plugins.Namespace))
			continue
		}
		var pods corev1.PodList
		if d.Spec.Selector != nil {
			err = o.Client.List(c, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels))
		}
		cancel()
		if err != nil {
			out = append(out, fail(GroupPlatform, DeploymentName(d.Name), "cannot list its pods: "+err.Error(), "you need list on pods in namespace "+plugins.Namespace))
			continue
		}
		out = append(out, Deployment(DeploymentFacts{Deployment: &d, Pods: pods.Items}))
	}
	for _, name := range platformDeployments {
		if !seen[name] {
			out = append(out, fail(GroupPlatform, DeploymentName(name), "not found among the platform's objects", "openfief platform upgrade --overlay DIR with the release overlay puts it back"))
		}
	}
	return out
}

// served checks what the running platform publishes and serves.
func served(o Options, call func() (context.Context, context.CancelFunc)) []Result {
	var out []Result
	c, cancel := call()
	var jwks corev1.ConfigMap
	err := o.Client.Get(c, client.ObjectKey{Namespace: plugins.Namespace, Name: plugins.TokenKeysConfigMap}, &jwks)
	var keys ServedKeys
	var servedErr error
	if err == nil {
		keys, servedErr = readServedKeys(c, o.Discovery)
	}
	cancel()
	out = append(out, TokenKeys(&jwks, err, keys, servedErr))

	c, cancel = call()
	var allow corev1.ConfigMap
	err = o.Client.Get(c, client.ObjectKey{Namespace: plugins.Namespace, Name: plugins.AllowListConfigMap}, &allow)
	cancel()
	out = append(out, AllowList(&allow, err))

	c, cancel = call()
	var rootCM, rootStatus corev1.ConfigMap
	rootErr := o.Client.Get(c, client.ObjectKey{Namespace: plugins.Namespace, Name: plugins.TrustRootConfigMap}, &rootCM)
	statusErr := o.Client.Get(c, client.ObjectKey{Namespace: plugins.Namespace, Name: plugins.TrustRootStatusConfigMap}, &rootStatus)
	cancel()
	out = append(out, TrustRoot(&rootCM, rootErr, &rootStatus, statusErr))

	if o.CoreHealth != nil {
		c, cancel := call()
		coreErr := o.CoreHealth(c)
		cancel()
		out = append(out, Core(coreErr))
		var storeErr error
		if coreErr == nil && o.CoreStatus != nil {
			c, cancel := call()
			storeErr = o.CoreStatus(c)
			cancel()
		}
		out = append(out, CoreStore(coreErr, storeErr))
	}
	return out
}

// The API server's ServiceAccount issuer discovery documents, which the
// operator publishes from (D-59).
const (
	openIDConfigurationPath = "/.well-known/openid-configuration"
	jwksPath                = "/openid/v1/jwks"
)

// readServedKeys reads the issuer and keys the API server serves now, as
// the operator's publisher reads them (the CLI does not link the
// operator).
func readServedKeys(ctx context.Context, d discovery.DiscoveryInterface) (ServedKeys, error) {
	raw, err := d.RESTClient().Get().AbsPath(openIDConfigurationPath).DoRaw(ctx)
	if err != nil {
		return ServedKeys{}, fmt.Errorf("read %s: %w", openIDConfigurationPath, err)
	}
	var conf struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return ServedKeys{}, fmt.Errorf("read %s: %w", openIDConfigurationPath, err)
	}
	jwks, err := d.RESTClient().Get().AbsPath(jwksPath).DoRaw(ctx)
	if err != nil {
		return ServedKeys{}, fmt.Errorf("read %s: %w", jwksPath, err)
	}
	return ServedKeys{Issuer: conf.Issuer, JWKS: jwks}, nil
}
