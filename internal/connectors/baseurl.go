package connectors

import (
	"errors"
	"net/url"
)

// ParseBaseURL reads an adapter config's baseURL: https://host[:port],
// optionally with a trailing "/", and nothing else (no user info, path,
// query or fragment). It returns the URL reduced to scheme and host, so an
// adapter builds every request path itself.
func ParseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errors.New("not a URL")
	case u.Scheme != "https":
		return nil, errors.New("must be an https URL")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry user info")
	case (u.Path != "" && u.Path != "/") || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("must not have a path, query or fragment")
	}
	return &url.URL{Scheme: "https", Host: u.Host}, nil
}
