package node

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/arkadiuss/openfief/internal/ocisign"
)

// startRegistry serves an in-memory registry on loopback, pushes the
// sandbox image built from our pause binary into it, and trusts it.
func (n *Node) startRegistry() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("devcluster: registry: %w", err)
	}
	n.regHost = l.Addr().String()
	n.regSrv = &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = n.regSrv.Serve(l) }()
	bin, err := os.ReadFile(filepath.Join(n.opts.BinDir, pauseBin))
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	img, err := ocisign.BinaryImage(pauseBin, bin, "65535:65535")
	if err != nil {
		return fmt.Errorf("devcluster: sandbox image: %w", err)
	}
	n.sandbox = n.regHost + "/openfief/pause:node"
	ref, err := name.NewTag(n.sandbox, name.Insecure)
	if err != nil {
		return fmt.Errorf("devcluster: sandbox image: %w", err)
	}
	if err := remote.Write(ref, img); err != nil {
		return fmt.Errorf("devcluster: pushing the sandbox image: %w", err)
	}
	return n.TrustRegistry(n.regHost)
}

// TrustRegistry lets containerd pull from the registry host over plain
// HTTP. Only loopback hosts and the node's own address on its bridge (where
// the pods, the operator's among them, can reach a registry too) are
// accepted.
func (n *Node) TrustRegistry(host string) error {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		return fmt.Errorf("devcluster: registry %q: %w", host, err)
	}
	ip := net.ParseIP(h)
	local := h == "localhost" || ip != nil && (ip.IsLoopback() || n.net.gateway != nil && ip.Equal(n.net.gateway))
	if !local {
		return fmt.Errorf("devcluster: registry %q is neither on loopback nor on the node's bridge address: only those are pulled over plain HTTP", host)
	}
	return writeFiles(map[string][]byte{
		filepath.Join(n.layout.certsD, host, "hosts.toml"): []byte(hostsTOML(host)),
	})
}
