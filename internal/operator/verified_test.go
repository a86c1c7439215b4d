package operator

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/testutil"
)

func TestReadVerifiedVersion(t *testing.T) {
	p := testutil.MakePlugin("rec", testutil.Image("rec-1")).Obj()
	p.UID = types.UID("uid-rec")
	at := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	rec := &v1alpha1.DeployedVersion{Image: p.Spec.Image, Manifest: p.Spec.Manifest, Signer: "owner", Trust: v1alpha1.ReasonSignedByTrustedSigner, VerifiedAt: &at}
	raw, err := encodeVerifiedVersion(rec)
	if err != nil {
		t.Fatal(err)
	}
	dep := func(edit func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "plugin-rec", Namespace: "openfief", OwnerReferences: []metav1.OwnerReference{ownerRef(p)}},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationVerifiedVersion: raw}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "plugin-rec",
					Containers:         []corev1.Container{{Name: containerName, Image: p.Spec.Image}},
				},
			}},
		}
		if edit != nil {
			edit(d)
		}
		return d
	}
	annotate := func(v string) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) { d.Spec.Template.Annotations[AnnotationVerifiedVersion] = v }
	}
	tests := map[string]struct {
		d       *appsv1.Deployment
		want    *v1alpha1.DeployedVersion
		wantErr string // "" for none; errNoRecord's text for errNoRecord
	}{
		"the operator's record":                       {d: dep(nil), want: rec},
		"not controlled by the Plugin":                {d: dep(func(d *appsv1.Deployment) { d.OwnerReferences = nil })},
		"controlled by an earlier Plugin of the name": {d: dep(func(d *appsv1.Deployment) { d.OwnerReferences[0].UID = "uid-earlier" })},
		"owned, not controlled":                       {d: dep(func(d *appsv1.Deployment) { d.OwnerReferences[0].Controller = ptr.To(false) })},
		"pods running as another ServiceAccount":      {d: dep(func(d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "default" })},
		"no record":                                   {d: dep(func(d *appsv1.Deployment) { d.Spec.Template.Annotations = nil }), wantErr: errNoRecord.Error()},
		"not JSON":                                    {d: dep(annotate("{")), wantErr: "not a verified-version record"},
		"an unknown field":                            {d: dep(annotate(`{"image":"x","verifiedAt":"2026-11-30T12:00:00Z","trusted":true}`)), wantErr: "unknown field"},
		"data after the object":                       {d: dep(annotate(raw + `{}`)), wantErr: "data after the object"},
		"no verifiedAt":                               {d: dep(annotate(`{"image":"` + p.Spec.Image + `","manifest":{"capabilities":["connector"]}}`)), wantErr: "no image or verifiedAt"},
		"another image than runs":                     {d: dep(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = testutil.Image("rec-2") }), wantErr: "but " + testutil.Image("rec-2") + " runs"},
		"too long":                                    {d: dep(annotate(strings.Repeat(" ", maxVerifiedVersionBytes+1))), wantErr: "more than"},
		"no plugin container":                         {d: dep(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "other" }), wantErr: "runs"},
		"JSON null":                                   {d: dep(annotate("null")), wantErr: "no image or verifiedAt"},
		"a list, not an object":                       {d: dep(annotate("[]")), wantErr: "not a verified-version record"},
		"verifiedAt not a timestamp":                  {d: dep(annotate(`{"image":"x","verifiedAt":"yesterday"}`)), wantErr: "not a verified-version record"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := readVerifiedVersion(tt.d, p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			case tt.wantErr == errNoRecord.Error() && !errors.Is(err, errNoRecord):
				t.Fatalf("error %v, want errNoRecord", err)
			}
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("record %s, want %s", describeJSON(got), describeJSON(tt.want))
			}
		})
	}
}

func TestEncodeVerifiedVersionIsStable(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	p := testutil.MakePlugin("stable", testutil.Image("stable-1")).
		ConfigSchema(`{"type":"object","properties":{"url":{"type":"string"}}}`).Config(`{"url":"https://a.example/?x=1&y=<2>"}`).Obj()
	rec := &v1alpha1.DeployedVersion{Image: p.Spec.Image, Manifest: p.Spec.Manifest, Config: p.Spec.Config, VerifiedAt: &at}
	a, err := encodeVerifiedVersion(rec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeVerifiedVersion(a)
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeVerifiedVersion(back)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !strings.Contains(a, "&y=<2>") || strings.HasSuffix(a, "\n") {
		t.Errorf("encodings differ or escape HTML:\n%s\n%s", a, b)
	}
}

// FuzzDecodeVerifiedVersion: any annotation value is refused or decoded
// without a panic, and what decodes encodes to a value that decodes and
// encodes to itself (the operator re-applies an unchanged record byte for
// byte).
func FuzzDecodeVerifiedVersion(f *testing.F) {
	f.Add(`{"image":"r.example/p@sha256:` + strings.Repeat("a", 64) + `","manifest":{"capabilities":["connector"]},"verifiedAt":"2026-11-30T12:00:00Z"}`)
	f.Add(`{"image":"x","verifiedAt":"2026-11-30T12:00:00Z","config":{"a":[1,2,{"b":null}]}}`)
	f.Add(`{"image":"x","verifiedAt":"2026-11-30T12:00:00Z"} {}`)
	f.Add(`null`)
	f.Add(`[{"image":1}]`)
	f.Fuzz(func(t *testing.T, s string) {
		rec, err := decodeVerifiedVersion(s)
		if err != nil {
			return
		}
		enc, err := encodeVerifiedVersion(rec)
		if err != nil {
			return // larger once re-encoded (escapes) than the bound
		}
		again, err := decodeVerifiedVersion(enc)
		if err != nil {
			t.Fatalf("%q decodes, but its encoding %q does not: %v", s, enc, err)
		}
		if enc2, err := encodeVerifiedVersion(again); err != nil || enc2 != enc {
			t.Fatalf("%q encodes to %q, then to %q (%v)", s, enc, enc2, err)
		}
	})
}
