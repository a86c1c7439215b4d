package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	openfief "github.com/arkadiuss/openfief/sdk/go"
)

// tokenLifetime is what the core asks TokenRequest for: ten minutes, the
// shortest the API server issues.
const tokenLifetime = 10 * time.Minute

// Tokens mints the tokens the core calls plugins with (D-59): a TokenRequest
// for the core's own ServiceAccount with the audience
// openfief-plugin:<instance>, the subject and audience the SDK's RequireCore
// checks. A token is reused until a fifth of its lifetime is left, and kept
// only in memory. Each instance's token is minted apart from the others':
// a mint in flight (waiting for the API server or the client's rate limit)
// holds up only the calls of its own instance, and concurrent calls of one
// instance share one mint. Its RBAC: create serviceaccounts/token on the
// core's ServiceAccount alone.
type Tokens struct {
	client        corev1client.ServiceAccountsGetter
	namespace, sa string
	now           func() time.Time
	// mu guards byInstance alone; each entry has its own lock.
	mu         sync.Mutex
	byInstance map[string]*mintedToken
}

// mintedToken is one instance's token; mu is held while it is minted.
type mintedToken struct {
	mu      sync.Mutex
	token   string
	refresh time.Time
}

// NewTokens returns a Tokens minting for ServiceAccount namespace/sa.
func NewTokens(client corev1client.ServiceAccountsGetter, namespace, sa string, now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{client: client, namespace: namespace, sa: sa, now: now, byInstance: map[string]*mintedToken{}}
}

// Token returns a current token for calling instance.
func (t *Tokens) Token(ctx context.Context, instance string) (string, error) {
	t.mu.Lock()
	m, ok := t.byInstance[instance]
	if !ok {
		m = &mintedToken{}
		t.byInstance[instance] = m
	}
	t.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := t.now()
	if m.token != "" && now.Before(m.refresh) {
		return m.token, nil
	}
	secs := int64(tokenLifetime / time.Second)
	tr, err := t.client.ServiceAccounts(t.namespace).CreateToken(ctx, t.sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{openfief.InstanceAudience(instance)},
			ExpirationSeconds: &secs,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for calling %s: %w", instance, err)
	}
	life := tr.Status.ExpirationTimestamp.Sub(now)
	m.token, m.refresh = tr.Status.Token, now.Add(life*4/5)
	return tr.Status.Token, nil
}

// Forget drops the instance's token, when the core stops calling it.
func (t *Tokens) Forget(instance string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byInstance, instance)
}
