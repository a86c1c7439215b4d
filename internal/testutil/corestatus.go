package testutil

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/arkadiuss/openfief/internal/core/ownerapi"
)

// CoreStatus reads the status of instance from the core's owner API at
// coreURL, with a fresh owner's token of namespace ns; anything but 200
// fails the test.
func CoreStatus(t testing.TB, cs kubernetes.Interface, ns, coreURL, instance string) ownerapi.InstanceStatus {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, coreURL+ownerapi.StatusPath(instance), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ownerapi.HeaderOwnerToken, OwnerToken(t, cs, ns))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		t.Fatalf("status of %s: %d %s", instance, resp.StatusCode, body)
	}
	var st ownerapi.InstanceStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
