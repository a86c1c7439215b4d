package webdavcsv

import (
	"net/http"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	for _, ok := range []Config{
		{URL: "https://cloud.example.com/remote.php/dav/files/anna/openfief/"},
		{URL: "https://nas.example.com:5006/"},
		{URL: "https://nas.example.com/Finance%20records/", Kinds: []string{"transactions", "balances"}},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for want, bad := range map[string]Config{
		"url: required":               {},
		"url: must be an https URL":   {URL: "http://nas.example.com/a/"},
		"url: the folder's path":      {URL: "https://nas.example.com/a"},
		"url: has no host":            {URL: "https:///a/"},
		"url: must not carry user":    {URL: "https://anna:pw@nas.example.com/a/"},
		"url: must not have a query":  {URL: "https://nas.example.com/a/?x"},
		"url: the path must not hold": {URL: "https://nas.example.com/a/../"},
		"url: longer than":            {URL: "https://nas.example.com/" + strings.Repeat("a", 2048) + "/"},
		`kinds[0]: "postings"`:        {URL: "https://nas.example.com/a/", Kinds: []string{"postings"}},
		"kinds[1]: prices appears":    {URL: "https://nas.example.com/a/", Kinds: []string{"prices", "prices"}},
	} {
		err := bad.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error containing %q", bad, err, want)
		}
		if _, err := New(bad); err == nil {
			t.Errorf("New accepted %+v", bad)
		}
	}
	// The password in the URL is never echoed.
	if err := (Config{URL: "https://anna:s3cret@nas.example.com/a/"}).Validate(); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v", err)
	}
}

// TestFileURL: a file's URL is the folder's, escaped as the owner wrote
// it, with the year folder and the file name after it.
func TestFileURL(t *testing.T) {
	folder, err := ParseFolderURL("https://nas.example.com:5006/Finance%20records/open%2Ffief/")
	if err != nil {
		t.Fatal(err)
	}
	c := newDAVClient(&http.Client{}, folder, "u", "p")
	got := c.fileURL(path(KindTransactions, "2026-03")).String()
	if want := "https://nas.example.com:5006/Finance%20records/open%2Ffief/2026/2026-03-transactions.csv"; got != want {
		t.Errorf("fileURL = %s, want %s", got, want)
	}
}
