package cosign

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// ErrRegistryConfig marks a registry config file that cannot be read or
// parsed. Its errors name the file, never its content.
var ErrRegistryConfig = errors.New("invalid registry config")

// MaxRegistryConfigBytes caps the registry config file.
const MaxRegistryConfigBytes = 1 << 20

// FileKeychain resolves registry credentials from a docker config file (the
// config.json format: "auths" entries with auth, username and password,
// identitytoken or registrytoken, and "credHelpers" or "credsStore" naming
// credential helpers), as docker, crane and cosign do. It stats the file on
// every Resolve and reads it again when its modification time or size
// changed, so an operator picks up a rotated Secret without a restart.
//
// It fails closed: once the file cannot be read or parsed, every Resolve
// returns an error naming the file (wrapping ErrRegistryConfig) rather than
// reading anonymously, until the file is valid again. It never prints the
// file's content. It is safe for concurrent use.
type FileKeychain struct {
	path string

	mu    sync.Mutex
	stamp fileStamp
	cf    *configfile.ConfigFile
	err   error
}

type fileStamp struct {
	mod  time.Time
	size int64
}

var _ authn.Keychain = (*FileKeychain)(nil)

// NewFileKeychain reads the docker config file at path. A file that cannot
// be read or parsed is an error, so a caller refuses to start rather than
// read registries with other credentials than the owner said.
func NewFileKeychain(path string) (*FileKeychain, error) {
	k := &FileKeychain{path: path}
	if _, err := k.current(); err != nil {
		return nil, err
	}
	return k, nil
}

// Path is the file the keychain reads.
func (k *FileKeychain) Path() string { return k.path }

// current returns the parsed file, reading it again when it changed.
func (k *FileKeychain) current() (*configfile.ConfigFile, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fi, err := os.Stat(k.path)
	if err != nil {
		k.cf, k.err, k.stamp = nil, fmt.Errorf("%w: registry config %s: %w", ErrRegistryConfig, k.path, err), fileStamp{}
		return nil, k.err
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if (k.cf != nil || k.err != nil) && st == k.stamp {
		return k.cf, k.err
	}
	k.stamp = st
	k.cf, k.err = loadConfigFile(k.path, fi)
	return k.cf, k.err
}

func loadConfigFile(path string, fi os.FileInfo) (*configfile.ConfigFile, error) {
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: registry config %s: not a regular file", ErrRegistryConfig, path)
	}
	if fi.Size() > MaxRegistryConfigBytes {
		return nil, fmt.Errorf("%w: registry config %s: larger than %d bytes", ErrRegistryConfig, path, MaxRegistryConfigBytes)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: registry config %s: %w", ErrRegistryConfig, path, err)
	}
	cf, err := config.LoadFromReader(bytes.NewReader(raw))
	if err != nil {
		// The parser's message may quote the file; it is left out.
		return nil, fmt.Errorf("%w: registry config %s: not a docker config.json file", ErrRegistryConfig, path)
	}
	return cf, nil
}

// Resolve implements authn.Keychain, as go-containerregistry's default
// keychain does for ~/.docker/config.json: the entry for the repository,
// else for its registry, else anonymous.
func (k *FileKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	cf, err := k.current()
	if err != nil {
		return nil, err
	}
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		cfg, err := cf.GetAuthConfig(key)
		if err != nil {
			return nil, fmt.Errorf("%w: registry config %s: credentials for %s: %w", ErrRegistryConfig, k.path, target.RegistryStr(), err)
		}
		if cfg.Username == "" && cfg.Password == "" && cfg.Auth == "" && cfg.IdentityToken == "" && cfg.RegistryToken == "" {
			continue
		}
		return authn.FromConfig(authn.AuthConfig{
			Username:      cfg.Username,
			Password:      cfg.Password,
			Auth:          cfg.Auth,
			IdentityToken: cfg.IdentityToken,
			RegistryToken: cfg.RegistryToken,
		}), nil
	}
	return authn.Anonymous, nil
}
