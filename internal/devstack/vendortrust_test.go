//go:build cluster

package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/cli"
	"github.com/arkadiuss/openfief/internal/core"
	"github.com/arkadiuss/openfief/internal/devcluster"
	"github.com/arkadiuss/openfief/internal/ocisign"
	"github.com/arkadiuss/openfief/internal/operator"
	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/testutil"
)

// TestVendorSignerLiveKwok: in `openfief dev`'s default mode (kwok) a
// vendor's image, signed in the vendor's registry by a key the stack does
// not know and copied with its signature into the stack's registry, is
// refused until the owner adds the vendor's key to openfief-trusted-signers,
// runs once it is added, and stops, with the reason, once it is removed;
// the CLI says the same as the operator at each step.
func TestVendorSignerLiveKwok(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	s, err := Start(ctx, Options{Dir: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, progress.String())
	}
	t.Cleanup(s.Stop)
	// kwok runs no container: any image the operator admits becomes Ready.
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.acme.example"}}
	img, err := ocisign.PluginImage(m, map[string][]byte{"plugin": []byte("#!/bin/false\n")})
	if err != nil {
		t.Fatal(err)
	}
	vendorSignerLive(t, ctx, s, func(vendorRegistry string) plugins.ImageRef {
		ref, err := ocisign.Push(ctx, vendorRegistry, "acme/fx", img)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}, nil)
}

// TestVendorSignerLiveRealNode is TestVendorSignerLiveKwok in `openfief dev
// --node real`'s mode (root, make node): the vendor's image is nbp-fx as
// the stack built it (trusting the NBP stand-in's CA), which runs as a
// container of the node once its key is trusted, and the core syncs it
// through the egress proxy from the stand-in for api.nbp.pl the stack
// serves at a stand-in address of the node.
func TestVendorSignerLiveRealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the platform on a real node: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root: containers, cgroups, a bridge and netfilter rules")
	}
	// The node lock's wait comes first: make test's other real-node
	// packages take the node in turn.
	ctx, cancel := context.WithTimeout(t.Context(), devcluster.NodeLockWait()+15*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	s, err := Start(ctx, Options{
		Dir: t.TempDir(), Node: devcluster.NodeReal, Progress: &progress,
		CoreScheduler: core.SchedulerOptions{DefaultInterval: 5 * time.Second, FirstSyncDelay: -1, Jitter: -1},
	})
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, progress.String())
	}
	t.Cleanup(s.Stop)
	if s.FakeNBP == nil || s.FakeDAV == nil {
		t.Fatal("no stand-ins for api.nbp.pl and the WebDAV server with a real node")
	}
	demo := s.Images["demo-v1"]
	vendorSignerLive(t, ctx, s, func(vendorRegistry string) plugins.ImageRef {
		// The demo image, without the owner's signature: a plain copy.
		from, err := name.NewDigest(demo.String(), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(from, remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		to, err := name.NewDigest(vendorRegistry+"/acme/nbp-fx@"+demo.Digest(), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(to, idx, remote.WithContext(ctx)); err != nil {
			t.Fatal(err)
		}
		ref, err := plugins.ParseImageRef(to.String())
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}, func(instance string) {
		// The core syncs the vendor's plugin, which reached the NBP
		// stand-in through the egress proxy.
		// The vendor's plugin is the only one that reaches the stand-in,
		// and it may have synced before this runs (a sync that finds the
		// rates up to date asks NBP nothing more), so any request counts.
		lastSync := regexp.MustCompile(`Last sync:\s+\S+ \([^)]*\), succeeded`)
		fxRates := regexp.MustCompile(`FX rates [1-9]`)
		testutil.Eventually(t, 2*time.Minute, "the core syncs "+instance+" from the NBP stand-in", func() (bool, string) {
			out, code := runCLI(ctx, s, "plugin", "status", instance, "--core-url", s.CoreURL)
			return code == cli.ExitOK && lastSync.MatchString(out) && fxRates.MatchString(out) && s.FakeNBP.Requests.Load() > 0, out
		})
	})
}

// vendorSignerLive is the scenario of the TestVendorSignerLive tests on s:
// publish pushes the vendor's image, unsigned, to the vendor's registry
// (a loopback registry of the test's) and returns it; running, if set, runs
// while the vendor's plugin runs.
func vendorSignerLive(t *testing.T, ctx context.Context, s *Stack, publish func(vendorRegistry string) plugins.ImageRef, running func(instance string)) {
	t.Helper()
	const instance = "acme"
	cs, err := kubernetes.NewForConfig(s.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := apiconv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(s.Cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	// The vendor signs in its own registry; the owner copies the image
	// with its signature into the stack's.
	vendor, err := ocisign.NewKeySigner()
	if err != nil {
		t.Fatal(err)
	}
	src := publish(serveRegistry(t, true))
	if err := vendor.Sign(ctx, src); err != nil {
		t.Fatal(err)
	}
	copied, err := s.CopyImage(ctx, src, "vendors/acme")
	if err != nil {
		t.Fatal(err)
	}
	image := copied.Image.String()
	vendorSigners, err := vendor.SignersJSON("acme-vendor")
	if err != nil {
		t.Fatal(err)
	}
	vendorFile := filepath.Join(t.TempDir(), "acme-signers.json")
	if err := os.WriteFile(vendorFile, vendorSigners, 0o600); err != nil {
		t.Fatal(err)
	}

	// Not trusted yet: the CLI refuses the image as the operator will,
	// reading the cluster's signers or their copy.
	if out, code := runCLI(ctx, s, "plugin", "install", "refused", "--image", image); code != cli.ExitUnsigned {
		t.Errorf("install before the key is trusted: exit %d, want %d (Unsigned)\n%s", code, cli.ExitUnsigned, out)
	}
	if out, code := runCLI(ctx, s, "plugin", "verify", image, "--signers", s.SignersFile); code != cli.ExitUnsigned {
		t.Errorf("verify with $OPENFIEF_SIGNERS before the key is trusted: exit %d, want %d (Unsigned)\n%s", code, cli.ExitUnsigned, out)
	}
	// The owner installs it anyway with the vendor's signers file (the CLI
	// then admits it) and approves it: the operator trusts the cluster's
	// signers only, and refuses it.
	mustCLI(t, ctx, s, "plugin", "install", instance, "--image", image, "--signers", vendorFile)
	mustCLI(t, ctx, s, "plugin", "approve", instance, "--yes")
	waitSignature(t, kc, instance, v1alpha1.ReasonUnsigned, v1alpha1.ReasonUntrustedSigner)
	waitEvent(t, cs, instance, operator.EventImageRefused, "Unsigned", "UntrustedSigner")
	if deploymentExists(t, cs, instance) {
		t.Error("a Deployment exists for the refused image")
	}

	// The owner adds the vendor's key to openfief-trusted-signers: the
	// operator applies it live and the plugin runs.
	ownerOnly := signersData(t, cs)
	start := time.Now()
	setSigners(t, cs, mergeSigners(t, ownerOnly, vendorSigners))
	waitSignature(t, kc, instance, v1alpha1.ReasonSignedByTrustedSigner)
	waitReady(t, kc, instance, v1alpha1.ReasonRunning)
	t.Logf("the vendor's key added: %s runs %s after the ConfigMap changed", instance, time.Since(start).Round(time.Millisecond))
	if !deploymentExists(t, cs, instance) {
		t.Error("no Deployment for the admitted image")
	}
	testutil.Eventually(t, time.Minute, "the CLI admits the image as the operator does", func() (bool, string) {
		out, code := runCLI(ctx, s, "plugin", "verify", image, "--signers", s.SignersFile)
		return code == cli.ExitOK && strings.Contains(out, "SignedByTrustedSigner") && strings.Contains(out, "acme-vendor"), out
	})
	if out, code := runCLI(ctx, s, "plugin", "install", "admitted", "--image", image); code != cli.ExitOK {
		t.Errorf("install once the key is trusted: exit %d\n%s", code, out)
	}
	if running != nil {
		running(instance)
	}

	// The owner removes the key: the plugin stops, and says why.
	start = time.Now()
	setSigners(t, cs, ownerOnly)
	waitSignature(t, kc, instance, v1alpha1.ReasonUntrustedSigner, v1alpha1.ReasonUnsigned)
	testutil.Eventually(t, 2*time.Minute, instance+"'s Deployment gone", func() (bool, string) {
		return !deploymentExists(t, cs, instance), "the Deployment remains"
	})
	t.Logf("the vendor's key removed: %s stopped %s after the ConfigMap changed", instance, time.Since(start).Round(time.Millisecond))
	waitEvent(t, cs, instance, operator.EventImageRefused, v1alpha1.ReasonUntrustedSigner)
	waitEvent(t, cs, instance, operator.EventStopped, "not signed by a trusted signer")
	testutil.Eventually(t, time.Minute, "the CLI refuses the image as the operator does", func() (bool, string) {
		out, code := runCLI(ctx, s, "plugin", "verify", image, "--signers", s.SignersFile)
		return code == cli.ExitUnsigned || code == cli.ExitUntrustedSigner, out
	})
}

// runCLI runs one CLI command in this process against s and returns its
// output and exit code.
func runCLI(ctx context.Context, s *Stack, args ...string) (string, int) {
	var out bytes.Buffer
	code := cli.Main(ctx, append([]string{"--kubeconfig", s.KubeconfigPath}, args...), cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	return out.String(), code
}

// mustCLI is runCLI failing the test unless the command exits 0.
func mustCLI(t *testing.T, ctx context.Context, s *Stack, args ...string) {
	t.Helper()
	if out, code := runCLI(ctx, s, args...); code != cli.ExitOK {
		t.Fatalf("openfief %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
}

// signersData is the signers.json openfief-trusted-signers holds.
func signersData(t *testing.T, cs kubernetes.Interface) []byte {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(plugins.Namespace).Get(t.Context(), plugins.OwnerSignersConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return []byte(cm.Data[plugins.OwnerSignersKey])
}

// setSigners writes data as openfief-trusted-signers' signers.json, as an
// owner's kubectl edit does.
func setSigners(t *testing.T, cs kubernetes.Interface, data []byte) {
	t.Helper()
	cms := cs.CoreV1().ConfigMaps(plugins.Namespace)
	cm, err := cms.Get(t.Context(), plugins.OwnerSignersConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[plugins.OwnerSignersKey] = string(data)
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mergeSigners is a signers.json with the signers of both.
func mergeSigners(t *testing.T, a, b []byte) []byte {
	t.Helper()
	var fa, fb struct {
		Signers []json.RawMessage `json:"signers"`
	}
	if err := json.Unmarshal(a, &fa); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fb); err != nil {
		t.Fatal(err)
	}
	fa.Signers = append(fa.Signers, fb.Signers...)
	out, err := json.Marshal(fa)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitSignature waits until the Plugin's SignatureVerified reason is one of
// reasons for its current generation.
func waitSignature(t *testing.T, kc client.Client, instance string, reasons ...string) {
	t.Helper()
	waitCondition(t, kc, instance, v1alpha1.ConditionSignatureVerified, reasons...)
}

// waitReady waits until the Plugin's Ready reason is one of reasons.
func waitReady(t *testing.T, kc client.Client, instance string, reasons ...string) {
	t.Helper()
	waitCondition(t, kc, instance, v1alpha1.ConditionReady, reasons...)
}

func waitCondition(t *testing.T, kc client.Client, instance, condition string, reasons ...string) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, instance+"'s "+condition+" one of "+strings.Join(reasons, ", "), func() (bool, string) {
		var p v1alpha1.Plugin
		if err := kc.Get(t.Context(), client.ObjectKey{Namespace: plugins.Namespace, Name: instance}, &p); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(p.Status.Conditions, condition)
		if c == nil || p.Status.ObservedGeneration != p.Generation {
			return false, "not reconciled yet"
		}
		return slices.Contains(reasons, c.Reason), c.Reason + ": " + c.Message
	})
}

// waitEvent waits for an Event of the operator on the Plugin with reason
// whose note holds one of notes.
func waitEvent(t *testing.T, cs kubernetes.Interface, instance, reason string, notes ...string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, "a "+reason+" Event on "+instance, func() (bool, string) {
		list, err := cs.EventsV1().Events(plugins.Namespace).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind != "Plugin" || e.Regarding.Name != instance {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason == reason && slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(e.Note, n) }) {
				return true, ""
			}
		}
		return false, strings.Join(seen, "\n")
	})
}

// deploymentExists reports whether the plugin's Deployment exists.
func deploymentExists(t *testing.T, cs kubernetes.Interface, instance string) bool {
	t.Helper()
	_, err := cs.AppsV1().Deployments(plugins.Namespace).Get(t.Context(), plugins.ServiceAccountName(instance), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
