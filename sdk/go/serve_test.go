// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

package openfief

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// TestServeDrainsCallsInFlight cancels the context while a call is in
// flight: the call completes, new connections are refused, serve returns nil.
func TestServeDrainsCallsInFlight(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		if _, err := io.WriteString(w, "done"); err != nil {
			t.Errorf("handler: write response: %v", err)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, srv, ln, 5*time.Second) }()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addr)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	cancel()
	// Shutdown closes the listener first: a new connection is refused.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after the context was done")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("serve returned %v while a call was in flight", err)
	default:
	}
	close(release)
	if body := <-got; body != "done" {
		t.Fatalf("call in flight got %q, want done", body)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve = %v, want nil after a clean drain", err)
	}
}

// TestServeCutsCallsAfterTheDrainTimeout leaves a call hanging past the
// drain timeout: serve closes it and reports the unclean stop.
func TestServeCutsCallsAfterTheDrainTimeout(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, srv, ln, 100*time.Millisecond) }()
	callErr := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err == nil {
			resp.Body.Close()
		}
		callErr <- err
	}()
	<-started
	start := time.Now()
	cancel()
	if err := <-served; err == nil {
		t.Fatal("serve = nil after cutting a call")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("serve took %v to give up, want about the 100 ms drain timeout", d)
	}
	if err := <-callErr; err == nil {
		t.Fatal("the hanging call succeeded")
	}
}

// TestServeConnectorFromEnvironment runs a connector exactly as a plugin's
// main does, configured only by the operator's environment, and calls it.
func TestServeConnectorFromEnvironment(t *testing.T) {
	d, token := coreDir(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil { // ServeConnector listens on it itself
		t.Fatal(err)
	}
	t.Setenv(EnvListenPort, strconv.Itoa(port))
	t.Setenv(EnvSAJWKSDir, d.dir)
	t.Setenv(EnvInstance, testInstance)
	t.Setenv(EnvCoreSubject, testSubject)

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeConnector(ctx, &fakeConnector{limit: 10}) }()

	url := "http://127.0.0.1:" + strconv.Itoa(port)
	client := connectorv1connect.NewConnectorServiceClient(h2cClient(token), url)
	var resp *connect.Response[connectorv1.SyncResponse]
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err = client.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: "b-env"}))
		if err == nil || time.Now().After(deadline) || connect.CodeOf(err) != connect.CodeUnavailable {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if resp.Msg.GetDelivery().GetBatchId() != "b-env" {
		t.Fatalf("batch ID %q", resp.Msg.GetDelivery().GetBatchId())
	}
	anon := connectorv1connect.NewConnectorServiceClient(h2cClient(""), url)
	if _, err := anon.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: "b"})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Sync without a token = %v, want Unauthenticated", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("ServeConnector = %v", err)
	}
}

func TestServeConnectorRefusesBadEnvironment(t *testing.T) {
	t.Setenv(EnvListenPort, "not-a-port")
	if err := ServeConnector(context.Background(), &fakeConnector{}); err == nil {
		t.Fatal("ServeConnector with a bad port succeeded")
	}
	t.Setenv(EnvListenPort, "")
	t.Setenv(EnvInstance, "")
	if err := ServeConnector(context.Background(), &fakeConnector{}); err == nil {
		t.Fatal("ServeConnector without an instance name succeeded")
	}
}
