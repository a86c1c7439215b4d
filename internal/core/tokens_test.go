package core

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/arkadiuss/openfief/internal/plugins"
	openfief "github.com/arkadiuss/openfief/sdk/go"
)

// TestTokensMintEachInstanceApart: while one instance's token request
// waits at the API server, another instance's token is minted and
// returned; concurrent calls for one instance share one mint; a minted
// token is reused. The API server is the scale benchmark's stand-in (real
// TokenRequests through client-go, real RS256 tokens), with the requests
// for the audience of "slow" held until the test lets them go.
func TestTokensMintEachInstanceApart(t *testing.T) {
	s, err := newScaleStandIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := make(chan struct{}, 16)
	var mu sync.Mutex
	minted := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		var tr authenticationv1.TokenRequest
		if _, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, &tr); err == nil {
			mu.Lock()
			for _, a := range tr.Spec.Audiences {
				minted[a]++
			}
			mu.Unlock()
			if slices.Contains(tr.Spec.Audiences, openfief.InstanceAudience("slow")) {
				held <- struct{}{}
				<-release
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cs, err := kubernetes.NewForConfig(coreClientConfig(&rest.Config{Host: srv.URL}, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	tokens := NewTokens(cs.CoreV1(), plugins.Namespace, DefaultServiceAccount, nil)
	ctx := t.Context()

	var slow sync.WaitGroup
	var slowTokens [3]string
	var slowErrs atomic.Int32
	for i := range slowTokens {
		slow.Go(func() {
			tok, err := tokens.Token(ctx, "slow")
			if err != nil {
				slowErrs.Add(1)
			}
			slowTokens[i] = tok
		})
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the token request of slow never reached the API server")
	}

	fast := make(chan error, 1)
	go func() {
		_, err := tokens.Token(ctx, "fast")
		fast <- err
	}()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatalf("fast: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fast's token waited for slow's")
	}

	close(release)
	slow.Wait()
	if slowErrs.Load() > 0 || slowTokens[0] == "" || slowTokens[0] != slowTokens[1] || slowTokens[1] != slowTokens[2] {
		t.Fatalf("slow's concurrent calls got different tokens or failed (%d errors)", slowErrs.Load())
	}
	again, err := tokens.Token(ctx, "slow")
	if err != nil || again != slowTokens[0] {
		t.Fatalf("slow's token was not reused: %v", err)
	}
	// The token is the instance's alone and passes the SDK's check.
	v, err := openfief.NewJWKSVerifier(s.dir, "slow", plugins.DefaultCoreSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(again); err != nil {
		t.Fatalf("slow's token: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := minted[openfief.InstanceAudience("slow")]; n != 1 {
		t.Errorf("slow's token was minted %d times, want once", n)
	}
	if n := minted[openfief.InstanceAudience("fast")]; n != 1 {
		t.Errorf("fast's token was minted %d times, want once", n)
	}
}
