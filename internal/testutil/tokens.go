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
