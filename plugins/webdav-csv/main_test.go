package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/views/webdavcsv"
	"github.com/arkadiuss/openfief/plugins/internal/manifesttest"
)

// TestManifest checks that webdav-csv asks for exactly what it needs
// (D-16, D-42): the view capability, no egress host of its own (the
// owner's server is an owner egress host, checked in owneregress_test.go),
// one Secret slot, webdav-credentials, mounted where the adapter reads the
// username and password, and the data tier accounts (OF-11) for
// transactions and balances; its config schema matches webdavcsv.Config.
func TestManifest(t *testing.T) {
	m, schema := manifesttest.Load(t)
	if !slices.Equal(m.Capabilities, []plugins.Capability{plugins.CapabilityView}) {
		t.Errorf("capabilities = %v, want [view]", m.Capabilities)
	}
	if len(m.Egress) != 0 {
		t.Errorf("egress = %v, want none: the owner names the server", m.Egress)
	}
	want := []plugins.SecretMount{{Name: "webdav-credentials", MountPath: webdavcsv.DefaultCredentialsDir}}
	if !slices.Equal(m.Secrets, want) {
		t.Errorf("secrets = %v, want %v", m.Secrets, want)
	}
	if !slices.Equal(m.DataTiers, []string{"accounts"}) {
		t.Errorf("data tiers %v, want [accounts]", m.DataTiers)
	}
	checkOwnerEgress(t, m)

	manifesttest.SameFields(t, schema, webdavcsv.Config{})
	s := manifesttest.Schema(t, schema)
	var kinds struct {
		Properties struct {
			Kinds struct {
				Items struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"kinds"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &kinds); err != nil {
		t.Fatal(err)
	}
	if got := kinds.Properties.Kinds.Items.Enum; !slices.Equal(got, webdavcsv.KindNames()) {
		t.Errorf("schema kinds %v, adapter kinds %v", got, webdavcsv.KindNames())
	}
	for _, cfg := range []string{
		`{"url":"https://cloud.example.com/remote.php/dav/files/anna/openfief/"}`,
		`{"url":"https://nas.example.com:5006/"}`,
		`{"url":"https://nas.example.com/Finance%20records/","kinds":[]}`,
		`{"url":"https://nas.example.com/a/","kinds":["transactions","balances"]}`,
	} {
		if !manifesttest.Accepts(t, s, cfg) {
			t.Errorf("schema refuses %s", cfg)
		}
		var c webdavcsv.Config
		dec := json.NewDecoder(strings.NewReader(cfg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Errorf("%s: %v", cfg, err)
		} else if err := c.Validate(); err != nil {
			t.Errorf("schema accepts %s, Validate refuses it: %v", cfg, err)
		}
	}
	for _, cfg := range []string{
		`{}`,
		`{"url":""}`,
		`{"url":"http://nas.example.com/a/"}`,
		`{"url":"https://nas.example.com/a"}`,
		`{"url":"https://nas.example.com"}`,
		`{"url":"https://anna:secret@nas.example.com/a/"}`,
		`{"url":"https://nas.example.com/a/?x=1/"}`,
		`{"url":"https://nas.example.com/a/#x/"}`,
		`{"url":"https://nas.example.com/` + strings.Repeat("a", 2048) + `/"}`,
		`{"url":"https://nas.example.com/a/","kinds":["postings"]}`,
		`{"url":"https://nas.example.com/a/","kinds":["prices","prices"]}`,
		`{"url":"https://nas.example.com/a/","password":"x"}`,
		`[]`,
	} {
		if manifesttest.Accepts(t, s, cfg) {
			t.Errorf("schema accepts %s", cfg)
		}
	}
}
