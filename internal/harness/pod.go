package harness

import (
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Instance is the plugin instance the harness runs the image as.
const Instance = "conformance"

// Where the harness puts the core and the egress proxy on the plugin's
// loopback, as the operator's Topology puts their ClusterIPs. Nothing
// listens at the core's address: the checks call the plugin, and a plugin's
// calls to the core are not judged.
const (
	coreAddress  = "127.0.0.1:8081"
	corePort     = 8081
	proxyAddress = "127.0.0.1:3128"
	proxyPort    = 3128
)

// resolvConf is what the kubelet would write, pointing at a resolver on
// the plugin's loopback that the sandbox records and never answers: a
// plugin has no DNS (D-32).
const resolvConf = "nameserver 127.0.0.53\nsearch openfief.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"

// pidsLimit bounds the plugin's processes; the platform leaves it to the
// kubelet's podPidsLimit, which the harness cannot read.
const pidsLimit = 1024

// grantAll is the grant of an owner who approves everything m asks for, so
// the harness runs the plugin with its whole request (D-16). The owner's own
// hosts (ownerEgress) are not known: each slot is filled with a placeholder
// (ownerHost), which gives the plugin the proxy as an owner's host would,
// and the egress check allows for the hosts its config names.
func grantAll(m plugins.Manifest) plugins.Grant {
	g := plugins.Grant{
		Name: Instance, Capabilities: m.Capabilities, Egress: m.Egress, DataTiers: m.DataTiers, Resources: m.Resources,
	}
	for i := range m.OwnerSlots() {
		g.OwnerEgress = append(g.OwnerEgress, ownerHost(i))
	}
	for _, s := range m.Secrets {
		g.Secrets = append(g.Secrets, plugins.SecretGrant{Name: s.Name})
	}
	return g
}

// ownerHost is the placeholder for the owner's host of slot i, under the
// reserved top-level domain .test (RFC 2606).
func ownerHost(i int) string { return fmt.Sprintf("owner-%d.harness.openfief.test", i+1) }

// compileWorkload runs the operator's own compilation of m under grantAll.
func compileWorkload(m plugins.Manifest) (plugins.Workload, error) {
	e, err := plugins.Effective(plugins.Plugin{Name: Instance, Manifest: m}, grantAll(m))
	if err != nil {
		return plugins.Workload{}, err
	}
	return plugins.Compile(e, plugins.Topology{
		CoreAddress: coreAddress, CorePodPort: corePort, ProxyAddress: proxyAddress, ProxyPodPort: proxyPort,
	})
}

// podTokens are the tokens the harness mounts in the pod.
type podTokens struct{ core, egress string }

// buildPod makes the Pod of workload w for an image with config cfg: the
// image's command and environment, the operator's environment on top (as a
// container's env overrides its image's), OPENFIEF_CONFIG, the projected
// tokens and openfief-sa-jwks as files, the Secrets' mounts as empty
// folders, the resources as limits, and the user 65532:65532.
func buildPod(img v1.Image, cfg *v1.ConfigFile, w plugins.Workload, config []byte, jwks []byte, tokens podTokens) (Pod, error) {
	args := append(slices.Clone(cfg.Config.Entrypoint), cfg.Config.Cmd...)
	if len(args) == 0 {
		return Pod{}, fmt.Errorf("the image's config names no entrypoint or command")
	}
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range cfg.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	for _, e := range w.Env {
		set(e.Name, e.Value)
	}
	set("OPENFIEF_CONFIG", string(config))
	pod := Pod{
		Image: img, Args: args, Dir: cfg.Config.WorkingDir,
		UID: 65532, GID: 65532,
		Limits:     Limits{MemoryBytes: w.Resources.MemoryBytes, CPUMilli: w.Resources.CPULimitMilli, Pids: pidsLimit},
		ResolvConf: resolvConf,
	}
	if pod.Dir == "" {
		pod.Dir = "/"
	}
	for _, k := range order {
		pod.Env = append(pod.Env, k+"="+env[k])
	}
	for _, cm := range w.ConfigMaps {
		if cm.Name == plugins.JWKSConfigMap {
			pod.Files = append(pod.Files,
				File{Path: cm.MountPath + "/jwks.json", Data: jwks},
				File{Path: cm.MountPath + "/issuer", Data: []byte(issuer)})
		}
	}
	for _, t := range w.Tokens {
		switch t.Audience {
		case plugins.AudienceCore:
			pod.Files = append(pod.Files, File{Path: t.Path, Data: []byte(tokens.core)})
		case plugins.AudienceEgress:
			pod.Files = append(pod.Files, File{Path: t.Path, Data: []byte(tokens.egress)})
			pod.Listen = append(pod.Listen, proxyAddress)
		}
	}
	for _, s := range w.Secrets {
		pod.Dirs = append(pod.Dirs, s.MountPath)
	}
	slices.SortFunc(pod.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return pod, nil
}
