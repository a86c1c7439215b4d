package ocisign

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/arkadiuss/openfief/internal/plugins"
	"github.com/arkadiuss/openfief/internal/trust/cosign"
)

func TestSignedPluginImageVerifies(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrers)))
		t.Cleanup(srv.Close)
		host := strings.TrimPrefix(srv.URL, "http://")
		ctx := context.Background()

		m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityConnector}, Egress: []string{"api.nbp.pl"}}
		img, err := PluginImage(m, map[string][]byte{"plugin": []byte("#!/bin/false\n")})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := Push(ctx, host, "plugins/demo", img)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := NewKeySigner()
		if err != nil {
			t.Fatal(err)
		}
		if err := signer.Sign(ctx, ref); err != nil {
			t.Fatal(err)
		}
		pem, _ := signer.PublicKeyPEM()
		v, err := cosign.NewVerifier(cosign.WithPublicKeys([]string{pem}))
		if err != nil {
			t.Fatal(err)
		}
		got, report, err := v.Verify(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Signatures) != 1 || got.Signatures[0].PublicKeyPEM == "" || got.Manifest == nil || !got.Manifest.Equal(m) {
			t.Fatalf("referrers %v: verified %+v (report %+v)", referrers, got, report)
		}

		// The same key's signature covers this digest only.
		other, err := PluginImage(m, map[string][]byte{"plugin": []byte("other")})
		if err != nil {
			t.Fatal(err)
		}
		otherRef, err := Push(ctx, host, "plugins/demo", other)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := v.Verify(ctx, otherRef); err != nil || len(got.Signatures) != 0 {
			t.Errorf("an unsigned sibling image verified: %+v, %v", got, err)
		}
	}
}

func TestPluginImageIsReproducible(t *testing.T) {
	m := plugins.Manifest{Capabilities: []plugins.Capability{plugins.CapabilityView}}
	files := map[string][]byte{"b": []byte("2"), "a": []byte("1")}
	a, err := PluginImage(m, files)
	if err != nil {
		t.Fatal(err)
	}
	b, err := PluginImage(m, map[string][]byte{"a": []byte("1"), "b": []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("same input, digests %s and %s", da, db)
	}
	if _, err := PluginImage(plugins.Manifest{}, nil); err == nil {
		t.Error("an invalid manifest was accepted")
	}
}

func TestBinaryImage(t *testing.T) {
	a, err := BinaryImage("pause", []byte("binary"), "65535:65535")
	if err != nil {
		t.Fatal(err)
	}
	b, err := BinaryImage("pause", []byte("binary"), "65535:65535")
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("same input, digests %s and %s", da, db)
	}
	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/pause" || cf.Config.User != "65535:65535" {
		t.Errorf("entrypoint %q user %q; want [/pause] 65535:65535", got, cf.Config.User)
	}
	for _, bad := range []string{"", "a/b"} {
		if _, err := BinaryImage(bad, nil, "1:1"); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}
