package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// AnnotationVerifiedVersion on a plugin's pod template records the version
// the operator verified and runs there: image, manifest, config, signer,
// trust and when it verified, as the JSON of a v1alpha1.DeployedVersion.
//
// It is what fail static trusts (OF-2): while the registry cannot answer,
// the version it names keeps running, also across operator restarts. It lives
// in the pod template because only the operator may write a plugin
// Deployment's spec (deploy/admission, rule 4), and beside the image that
// actually runs. status.deployed only reports it: anyone who may write
// plugins/status can set that.
const AnnotationVerifiedVersion = "openfief.io/verified-version"

// maxVerifiedVersionBytes bounds the record, written and read back: a pod
// template's annotations may hold 256 KiB in all, and the config hash needs
// a little of it. A version whose manifest and config together exceed it
// cannot run (the apply fails and says so); signed manifest labels are
// usually a few KiB.
const maxVerifiedVersionBytes = 250 << 10

// errNoRecord means the Deployment is the operator's for this Plugin but
// carries no record (one written by an operator that kept it in status only).
var errNoRecord = errors.New("no " + AnnotationVerifiedVersion + " annotation")

// verifiedVersion is the running version's record as the operator read it.
type verifiedVersion struct {
	// rec is the record.
	rec *v1alpha1.DeployedVersion
	// raw is the annotation exactly as applied, so an unchanged record is
	// applied again byte for byte (OF-4); empty for a legacy record.
	raw string
	// legacy marks a record taken from status.deployed for a Deployment of
	// an older operator: it names what that Deployment runs, but nothing
	// vouches for its manifest, so only a definite verification now lets it
	// keep running; an unanswered check does not (fail closed).
	legacy bool
}

// trusted returns the record fail static may rely on while the registry
// cannot answer: the operator's own, never a legacy one.
func (v *verifiedVersion) trusted() *v1alpha1.DeployedVersion {
	if v == nil || v.legacy {
		return nil
	}
	return v.rec
}

// encodeVerifiedVersion renders rec for AnnotationVerifiedVersion:
// deterministic JSON, HTML characters unescaped.
func encodeVerifiedVersion(rec *v1alpha1.DeployedVersion) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return "", fmt.Errorf("encode %s: %w", AnnotationVerifiedVersion, err)
	}
	if b.Len() > maxVerifiedVersionBytes {
		return "", fmt.Errorf("%s would be %d bytes, more than %d", AnnotationVerifiedVersion, b.Len(), maxVerifiedVersionBytes)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// decodeVerifiedVersion parses an AnnotationVerifiedVersion value strictly:
// bounded, one JSON object with only DeployedVersion's fields, an image and
// a verification time.
func decodeVerifiedVersion(s string) (*v1alpha1.DeployedVersion, error) {
	if len(s) > maxVerifiedVersionBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", len(s), maxVerifiedVersionBytes)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var rec v1alpha1.DeployedVersion
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("not a verified-version record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a verified-version record: data after the object")
	}
	if rec.Image == "" || rec.VerifiedAt == nil {
		return nil, errors.New("not a verified-version record: no image or verifiedAt")
	}
	return &rec, nil
}

// readVerifiedVersion returns the record on the plugin's Deployment d. A
// Deployment that is not the operator's for p (not controlled by this very
// Plugin, or its pods not running as plugin-<name>) has none: (nil, nil). A
// Deployment of the operator's without the annotation gives errNoRecord; a
// malformed record, or one naming another image than the one that runs, an
// error saying why.
func readVerifiedVersion(d *appsv1.Deployment, p *v1alpha1.Plugin) (*v1alpha1.DeployedVersion, error) {
	return factsOf(d).verifiedVersion(p)
}

// runningImage is the image of the plugin container of d, "" without one.
func runningImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == containerName {
			return c.Image
		}
	}
	return ""
}

// report is the record as status.deployed shows it, nil without one.
func (v *verifiedVersion) report() *v1alpha1.DeployedVersion {
	if v == nil {
		return nil
	}
	return v.rec.DeepCopy()
}

// setVerifiedVersion puts the record on d's pod template.
func setVerifiedVersion(d *appsv1.Deployment, raw string) {
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations[AnnotationVerifiedVersion] = raw
}

// How one Plugin reconcile uses the record: it reads the record of what
// runs (readRunning) before it checks anything, and stamps the record of
// what it applies (nextRecord) only when another version starts.

// readRunning reads the record of the version that runs from the plugin's
// Deployment (AnnotationVerifiedVersion), which only the operator may write
// (deploy/admission), and never from status.deployed, which anyone who may
// write plugins/status can set. A Deployment left by
// an operator that kept the record in status only gives a legacy record,
// trusted only once its image verifies again. An invalid record is reported
// and trusted for nothing.
func (r *PluginReconciler) readRunning(ctx context.Context, p *v1alpha1.Plugin, ps *pass) error {
	// The cache may not have seen the Deployment that the pass before this
	// one created, or may hold a version the operator has not read whole:
	// the Deployment is then read from the API server (ownedObjects), and
	// that read cannot be stale. Nothing running would otherwise mean a
	// second record stamped over the first, or a version reported stopped
	// that runs.
	f, live, err := r.owned.deployment(ctx, p.Name)
	if err != nil {
		return err
	}
	ps.readLive = live
	if f == nil {
		return nil
	}
	rec, err := f.verifiedVersion(p)
	switch {
	case errors.Is(err, errNoRecord):
		if s := p.Status.Deployed; s != nil && s.VerifiedAt != nil && s.Image == f.image {
			ps.running = &verifiedVersion{rec: s.DeepCopy(), legacy: true}
		}
	case err != nil:
		ps.previousErr = fmt.Sprintf("the record of the running version on Deployment %s is invalid: %v", plugins.ServiceAccountName(p.Name), err)
	case rec != nil:
		ps.running = &verifiedVersion{rec: rec, raw: f.record}
	}
	return nil
}

// sameAsDeployed reports whether v is exactly the version d records.
func sameAsDeployed(v *plugins.Version, d *v1alpha1.DeployedVersion) bool {
	if v == nil || d == nil || d.VerifiedAt == nil {
		return false
	}
	return v.Image.String() == d.Image && v.Manifest.Equal(apiconv.ManifestFromAPI(d.Manifest)) && plugins.EqualConfig(v.Config, apiconv.RawJSON(d.Config))
}

// nextRecord is the verified-version record, and its annotation, for what
// runs now: the running version's own, unchanged, while that version keeps
// running; a new one, stamped now, when another version starts or a legacy
// record has just verified again.
//
// ps.running may come from the cache, which may not yet hold what the pass
// before this one applied: a pass queued by an upgrade's apply can still
// find the previous version's Deployment there (readRunning reads a
// Deployment the cache does not hold from the API server itself). A
// record stamped then would differ from the one on the Deployment only in
// its verifiedAt, and applying it would change the pod template and roll
// the plugin out a second time, with a second RolledOut. So
// before stamping, unless readRunning already read it live, the Deployment
// is read from the API server (r.Reader), and a record of the operator's
// there for exactly this version (image, manifest, config) is kept, as it
// would have been had the cache been current.
func (r *PluginReconciler) nextRecord(ctx context.Context, p *v1alpha1.Plugin, ps *pass) (*v1alpha1.DeployedVersion, string, error) {
	run := ps.running
	keeps := run != nil && (ps.plan.Outcome == plugins.RolloutPrevious || sameAsDeployed(ps.current, run.rec))
	if keeps && !run.legacy {
		return run.rec, run.raw, nil
	}
	version := ps.plan.Run
	if !ps.readLive {
		live, err := r.liveRecord(ctx, p)
		if err != nil {
			return nil, "", err
		}
		if live != nil && sameAsDeployed(version, live.rec) {
			return live.rec, live.raw, nil
		}
	}
	v := ps.verification
	if ps.plan.Outcome == plugins.RolloutPrevious {
		v = ps.previousVerification
	}
	rec := &v1alpha1.DeployedVersion{
		Image:      version.Image.String(),
		Manifest:   apiconv.ManifestToAPI(version.Manifest),
		Signer:     v.Signer,
		Trust:      v.Reason,
		VerifiedAt: &metav1.Time{Time: r.now().UTC().Truncate(time.Second)},
	}
	if len(version.Config) > 0 {
		rec.Config = &apiextensionsv1.JSON{Raw: append([]byte(nil), version.Config...)}
	}
	raw, err := encodeVerifiedVersion(rec)
	if err != nil {
		return nil, "", err
	}
	return rec, raw, nil
}

// liveRecord reads the record on the plugin's Deployment from the API
// server (r.Reader), as readRunning reads it from the cache: nil when there
// is no Deployment, or no valid record of the operator's on it (a legacy or
// malformed one is nothing to keep).
func (r *PluginReconciler) liveRecord(ctx context.Context, p *v1alpha1.Plugin) (*verifiedVersion, error) {
	d, err := r.owned.wholeDeployment(ctx, p.Name)
	if err != nil || d == nil {
		return nil, err
	}
	if rec, err := readVerifiedVersion(d, p); err == nil && rec != nil {
		return &verifiedVersion{rec: rec, raw: d.Spec.Template.Annotations[AnnotationVerifiedVersion]}, nil
	}
	return nil, nil
}

// now is r.Now, or time.Now without one.
func (r *PluginReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
