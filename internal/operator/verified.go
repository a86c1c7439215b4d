package operator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/api/v1alpha1"
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
	if owner := metav1.GetControllerOfNoCopy(d); owner == nil || owner.UID != p.UID || owner.Kind != "Plugin" {
		return nil, nil
	}
	if d.Spec.Template.Spec.ServiceAccountName != plugins.ServiceAccountName(p.Name) {
		return nil, nil
	}
	raw, ok := d.Spec.Template.Annotations[AnnotationVerifiedVersion]
	if !ok {
		return nil, errNoRecord
	}
	rec, err := decodeVerifiedVersion(raw)
	if err != nil {
		return nil, err
	}
	if img := runningImage(d); img != rec.Image {
		return nil, fmt.Errorf("it names %s, but %s runs", rec.Image, img)
	}
	return rec, nil
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
