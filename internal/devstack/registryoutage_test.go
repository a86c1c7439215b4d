package devstack

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A stopped registry refuses connections on every one of its addresses, and
// serves the images it held once started again at the same addresses.
func TestSwitchableRegistryGoesDownAndComesBack(t *testing.T) {
	var lns []net.Listener
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	s := serveSwitchable(registry.New(registry.Logger(discardLog())), lns...)
	t.Cleanup(s.stop)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	refs := make([]name.Digest, len(s.addrs))
	for i, a := range s.addrs {
		if refs[i], err = name.NewDigest(a+"/outage/image@"+d.String(), name.Insecure); err != nil {
			t.Fatal(err)
		}
	}
	if err := remote.Write(refs[0], img); err != nil {
		t.Fatal(err)
	}
	read := func() []error {
		errs := make([]error, len(refs))
		for i, ref := range refs {
			_, errs[i] = remote.Image(ref)
		}
		return errs
	}
	for i, err := range read() {
		if err != nil {
			t.Fatalf("serving: reading the image at %s: %v", s.addrs[i], err)
		}
	}

	s.stop()
	s.stop() // twice is once
	for i, err := range read() {
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("stopped: reading the image at %s: %v, want the connection refused", s.addrs[i], err)
		}
	}

	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	if err := s.start(); err != nil { // starting a running server does nothing
		t.Fatal(err)
	}
	for i, err := range read() {
		if err != nil {
			t.Errorf("served again: reading the image at %s: %v", s.addrs[i], err)
		}
	}
}

// Outside the in-cluster mode there is no registry to stop.
func TestStopRegistryNeedsTheInClusterMode(t *testing.T) {
	var s Stack
	if err := s.StopRegistry(); !errors.Is(err, errNoBridgeRegistry) {
		t.Errorf("StopRegistry: %v, want %v", err, errNoBridgeRegistry)
	}
	if err := s.StartRegistry(); !errors.Is(err, errNoBridgeRegistry) {
		t.Errorf("StartRegistry: %v, want %v", err, errNoBridgeRegistry)
	}
}
