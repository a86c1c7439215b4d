//go:build cluster

package apiversions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// maxEtcdReply bounds what the tests read of one etcd answer.
const maxEtcdReply = 16 << 20

// storedObjects reads, from etcd itself, each object of plural in the
// openfief namespace as the API server stored it, by name: what it wrote,
// which no API call shows (a read converts to the version asked for). It
// uses etcd's JSON gateway (POST /v3/kv/range), so the test needs no etcd
// client library.
func (e *env) storedObjects(t *testing.T, plural string) map[string]map[string]any {
	t.Helper()
	prefix := "/registry/" + group + "/" + plural + "/" + plugins.Namespace + "/"
	end := []byte(prefix)
	end[len(end)-1]++ // the first key after every key with the prefix
	body, err := json.Marshal(map[string]string{
		"key":       base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(end),
	})
	if err != nil {
		t.Fatal(err)
	}
	u := e.cluster.EtcdURL().JoinPath("/v3/kv/range")
	hc := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := hc.Post(u.String(), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("etcd range %s: %v", prefix, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxEtcdReply+1))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(raw) > maxEtcdReply {
		t.Fatalf("etcd range %s: %s, %d bytes", prefix, resp.Status, len(raw))
	}
	var reply struct {
		KVs []struct {
			Key   []byte `json:"key"`
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		t.Fatalf("etcd range %s: %v", prefix, err)
	}
	out := map[string]map[string]any{}
	for _, kv := range reply.KVs {
		var obj map[string]any
		if err := json.Unmarshal(kv.Value, &obj); err != nil {
			t.Fatalf("etcd %s: not a JSON object: %v", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), prefix)] = obj
	}
	return out
}

// storedVersions is the apiVersion each object of plural is stored in, by
// name.
func (e *env) storedVersions(t *testing.T, plural string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, obj := range e.storedObjects(t, plural) {
		out[name], _ = obj["apiVersion"].(string)
	}
	return out
}

// requireStoredIn fails unless every object of plural is stored in version,
// and there are want of them.
func (e *env) requireStoredIn(t *testing.T, plural, version string, want int) {
	t.Helper()
	stored := e.storedVersions(t, plural)
	var wrong []string
	for name, v := range stored {
		if v != group+"/"+version {
			wrong = append(wrong, fmt.Sprintf("%s in %s", name, v))
		}
	}
	if len(wrong) > 0 || len(stored) != want {
		t.Fatalf("etcd holds %d %s (want %d), all in %s/%s; not so: %v", len(stored), plural, want, group, version, wrong)
	}
}
