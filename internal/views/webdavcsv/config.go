package webdavcsv

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// DefaultCredentialsDir is where the manifest mounts the webdav-credentials
// Secret, with the files username and password.
const DefaultCredentialsDir = "/etc/openfief/webdav-csv"

// Config is a webdav-csv instance's config, read from OPENFIEF_CONFIG with
// openfief.LoadConfig (D-11). plugins/webdav-csv/manifest.json carries its
// JSON Schema; Validate checks the same rules, so a config that reaches the
// plugin another way is refused too.
type Config struct {
	// URL is the WebDAV folder the files are kept in:
	// https://host[:port]/path/, ending with "/". The owner approves its
	// host for the plugin (an owner egress host); the folder's parent must
	// exist, the folder and its year folders are created when missing.
	URL string `json:"url"`
	// Kinds limits the files written to these kinds of entry; empty or
	// absent writes every kind the view is sent. Entries of other kinds are
	// acknowledged and not written.
	Kinds []string `json:"kinds,omitempty"`
}

// Validate returns every rule the config breaks, joined, each naming its
// field.
func (c Config) Validate() error {
	var errs []error
	if _, err := ParseFolderURL(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	}
	for i, k := range c.Kinds {
		switch {
		case !slices.Contains(KindNames(), k):
			errs = append(errs, fmt.Errorf("kinds[%d]: %q is not one of %s", i, k, strings.Join(KindNames(), ", ")))
		case slices.Contains(c.Kinds[:i], k):
			errs = append(errs, fmt.Errorf("kinds[%d]: %s appears more than once", i, k))
		}
	}
	return errors.Join(errs...)
}

// writes reports whether the config lets the view write files of kind k.
func (c Config) writes(k Kind) bool {
	return len(c.Kinds) == 0 || slices.Contains(c.Kinds, string(k))
}

// maxURLLen bounds the config's url, as the manifest's schema does.
const maxURLLen = 2048

// ParseFolderURL reads the config's url: an https URL with a host, a path
// that starts and ends with "/", and nothing else (no user info, query or
// fragment, no "." or ".." segment). Credentials come from the Secret, never
// from the URL.
func ParseFolderURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("required: the https URL of the WebDAV folder, ending with /")
	}
	if len(s) > maxURLLen {
		return nil, fmt.Errorf("longer than %d bytes", maxURLLen)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errors.New("not a URL")
	case u.Scheme != "https":
		return nil, errors.New("must be an https URL")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry user info: the username and password go into the webdav-credentials Secret")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "":
		return nil, errors.New("must not have a query or fragment")
	case !strings.HasPrefix(u.Path, "/") || !strings.HasSuffix(u.Path, "/"):
		return nil, errors.New("the folder's path must end with /")
	}
	if u.Path != "/" {
		for _, seg := range strings.Split(strings.Trim(u.Path, "/"), "/") {
			if seg == "" || seg == "." || seg == ".." {
				return nil, errors.New(`the path must not hold an empty, "." or ".." segment`)
			}
		}
	}
	return &url.URL{Scheme: "https", Host: u.Host, Path: u.Path, RawPath: u.RawPath}, nil
}
