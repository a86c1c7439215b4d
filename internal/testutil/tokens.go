package testutil

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// EnsureServiceAccount creates the ServiceAccount ns/name unless it exists.
func EnsureServiceAccount(t testing.TB, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// ServiceAccountToken asks the API server for a ten-minute token of the
// ServiceAccount ns/name with one audience, as the kubelet and the core do,
// and returns it with its expiry.
func ServiceAccountToken(t testing.TB, cs kubernetes.Interface, ns, name, audience string) (string, time.Time) {
	t.Helper()
	exp := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s for %s: %v", ns, name, audience, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time
}

// OwnerToken creates the owner's ServiceAccount in ns unless it exists and
// mints the owner's credential for the core's owner API, as the CLI does
// (OF-18): a ten-minute token of openfief-owner for openfief-core-owner.
func OwnerToken(t testing.TB, cs kubernetes.Interface, ns string) string {
	t.Helper()
	EnsureServiceAccount(t, cs, ns, ownerapi.ServiceAccount)
	tok, _ := ServiceAccountToken(t, cs, ns, ownerapi.ServiceAccount, ownerapi.Audience)
	return tok
}
