package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/arkadiuss/openfief/internal/core/store/deliveryrules"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/egress"
	"github.com/arkadiuss/openfief/internal/plugins"
	openfief "github.com/arkadiuss/openfief/sdk/go"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	viewv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/view/v1"
)

// checkLabel reads the manifest label as the operator does
// (plugins.ParseManifestLabel) and combines it with the signature verdict.
// It reports whether the label is valid, so the plugin can run.
func (r *run) checkLabel(cfg *v1.ConfigFile) bool {
	label, ok := cfg.Config.Labels[plugins.ManifestLabel]
	if !ok {
		r.set(CheckLabel, Fail, "the image has no %s label", plugins.ManifestLabel)
		return false
	}
	m, err := plugins.ParseManifestLabel(label)
	if err != nil {
		r.set(CheckLabel, Fail, "%s", clean(err.Error(), 300))
		return false
	}
	r.manifest = m
	what := describeManifest(m)
	switch sig := r.opts.Signature; {
	case sig == nil:
		r.set(CheckLabel, Skip, "manifest label valid (%s); signature not checked: give --signers FILE or --key PUB.pem", what)
	case !sig.Verified:
		r.set(CheckLabel, Fail, "manifest label valid (%s), but the signature check refused the image: %s", what, clean(sig.Detail, 300))
	default:
		r.set(CheckLabel, Pass, "manifest label valid (%s); %s", what, clean(sig.Detail, 200))
	}
	return true
}

// describeManifest names a manifest's capabilities and hosts in a few words.
func describeManifest(m plugins.Manifest) string {
	var caps []string
	for _, c := range m.Capabilities {
		caps = append(caps, string(c))
	}
	out := strings.Join(caps, ", ")
	if len(m.Egress) > 0 {
		out += "; egress " + strings.Join(m.Egress, ", ")
	}
	if n := m.OwnerSlots(); n > 0 {
		out += fmt.Sprintf("; %d host(s) of the owner's choosing", n)
	}
	return clean(out, 300)
}

// needsOwner reports whether the plugin depends on what only an owner
// gives: Secrets, or hosts of the owner's choosing.
func (r *run) needsOwner() bool { return len(r.manifest.Secrets) > 0 || r.manifest.OwnerSlots() > 0 }

func (r *run) has(c plugins.Capability) bool { return slices.Contains(r.manifest.Capabilities, c) }

// checkServes waits for the plugin's port, then makes one call with the
// core's token, which must get a Connect answer. It reports whether the
// plugin serves.
func (r *run) checkServes(ctx context.Context) bool {
	start := time.Now()
	deadline := start.Add(r.opts.ServeTimeout)
	for {
		if st, done := r.hasExited(); done {
			r.set(CheckServes, Fail, "the plugin exited before serving (%s)%s", describeExit(st), r.outputTail())
			return false
		}
		if r.dialPlugin(ctx) == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.set(CheckServes, Fail, "nothing accepted connections on port %d within %s of the start%s", r.workload.PluginPort, r.opts.ServeTimeout, r.outputTail())
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	waited := time.Since(start).Round(time.Millisecond)
	if err := r.probe(ctx, r.rightToken()); err != nil && !connect.IsWireError(err) {
		if st, done := r.hasExited(); done {
			r.set(CheckServes, Fail, "the plugin exited before serving (%s)%s", describeExit(st), r.outputTail())
			return false
		}
		r.set(CheckServes, Fail, "port %d accepts connections but answered no Connect RPC: %s%s", r.workload.PluginPort, clean(err.Error(), 300), r.outputTail())
		return false
	}
	r.set(CheckServes, Pass, "serves the contract on port %d, %s after the start", r.workload.PluginPort, waited)
	return true
}

// probe makes the call the auth check judges: Sync for a connector, an
// empty Export page for a view.
func (r *run) probe(ctx context.Context, token string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if r.has(plugins.CapabilityConnector) {
		req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: "harness-auth"})
		authorize(req.Header(), token)
		_, err := r.connector().Sync(ctx, req)
		return err
	}
	req := connect.NewRequest(&viewv1.ExportRequest{RunId: "harness-auth", DataTiers: r.workload.DataTiers})
	authorize(req.Header(), token)
	_, err := r.view().Export(ctx, req)
	return err
}

func authorize(h interface{ Set(string, string) }, token string) {
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
}

// checkAuth makes the probe call with every token the core would never
// send, each of which must be refused as Unauthenticated, then with the
// core's, which must not be (D-59).
func (r *run) checkAuth(ctx context.Context) {
	now := r.opts.Now()
	aud := openfief.InstanceAudience(Instance)
	other, err := newMinter(r.opts.Now)
	if err != nil {
		r.set(CheckAuth, Skip, "not judged: %v", err)
		return
	}
	otherKey, _ := other.mint(plugins.DefaultCoreSubject, aud, now)
	refused := []struct{ what, token string }{
		{"without a token", ""},
		{"with another instance's token", r.coreToken(openfief.InstanceAudience("other-instance"), plugins.DefaultCoreSubject, now)},
		{"with an expired token", r.coreToken(aud, plugins.DefaultCoreSubject, now.Add(-2*tokenLife))},
		{"with another caller's token", r.coreToken(aud, plugins.ServiceAccountUsername("other-plugin"), now)},
		{"with a token signed by another key", otherKey},
	}
	for _, c := range refused {
		err := r.probe(ctx, c.token)
		if code := connect.CodeOf(err); err == nil || code != connect.CodeUnauthenticated {
			r.set(CheckAuth, Fail, "a call %s was not refused as unauthenticated: %s", c.what, describeAnswer(err))
			return
		}
	}
	if err := r.probe(ctx, r.rightToken()); err != nil && connect.CodeOf(err) == connect.CodeUnauthenticated {
		r.set(CheckAuth, Fail, "the core's own token was refused: %s", describeAnswer(err))
		return
	}
	r.set(CheckAuth, Pass, "refuses calls without a token, with another instance's, an expired one, another caller's and another key's; accepts the core's")
}

// describeAnswer names a call's outcome in a few cleaned words.
func describeAnswer(err error) string {
	if err == nil {
		return "it answered OK"
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s (%s)", ce.Code(), clean(ce.Message(), 200))
	}
	return clean(err.Error(), 200)
}

// checkSync calls Sync as the core's first sync does and judges the
// delivery by the core's own rules (deliveryrules, and the batch echo the
// scheduler checks).
func (r *run) checkSync(ctx context.Context) {
	if !r.has(plugins.CapabilityConnector) {
		r.set(CheckSync, Skip, "not a connector")
		return
	}
	const batch = "harness-sync-1"
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req := connect.NewRequest(&connectorv1.SyncRequest{BatchId: batch})
	authorize(req.Header(), r.rightToken())
	resp, err := r.connector().Sync(ctx, req)
	if err != nil {
		r.judgeCallError(CheckSync, "Sync", err)
		return
	}
	r.judgeDelivery(CheckSync, "Sync", batch, deliveryrules.KindSync, resp.Msg.GetDelivery())
}

// judgeCallError judges a connector's error answer: unavailable is what the
// contract asks for when the institution fails, which the harness's
// stand-ins make happen, so the delivery cannot be judged; anything else
// fails.
func (r *run) judgeCallError(check, method string, err error) {
	if connect.IsWireError(err) && connect.CodeOf(err) == connect.CodeUnavailable {
		r.set(check, Skip, "%s answered unavailable (%s): the harness answers the plugin's hosts with stand-ins that complete no TLS, so no delivery could be judged",
			method, describeAnswer(err))
		return
	}
	if connect.IsWireError(err) && connect.CodeOf(err) == connect.CodeFailedPrecondition && r.needsOwner() {
		r.set(check, Skip, "%s answered failed_precondition (%s): the harness mounts the manifest's Secrets empty (only an owner has their keys) and grants no host of the owner's",
			method, describeAnswer(err))
		return
	}
	r.set(check, Fail, "%s answered %s, where the contract allows a delivery or unavailable", method, describeAnswer(err))
}

func (r *run) judgeDelivery(check, method, batch string, kind deliveryrules.Kind, d *connectorv1.Delivery) {
	switch {
	case d == nil:
		r.set(check, Fail, "%s answered no delivery, which the core refuses", method)
	case d.GetBatchId() != batch:
		r.set(check, Fail, "%s's delivery names batch %q, not the %q the core sent", method, clean(d.GetBatchId(), 80), batch)
	default:
		if err := deliveryrules.Validate(Instance, kind, d); err != nil {
			r.set(check, Fail, "the core would refuse %s's delivery: %s", method, clean(err.Error(), 400))
			return
		}
		r.set(check, Pass, "%s's delivery (%d entries) passes the core's rules", method, entries(d))
	}
}

func entries(d *connectorv1.Delivery) int {
	return len(d.GetTransactions()) + len(d.GetBalanceAssertions()) + len(d.GetPrices()) +
		len(d.GetFxRates()) + len(d.GetIndexReadings()) + len(d.GetProblems())
}

// sampleFile is the small statement the import-file check sends.
const sampleFile = "date,description,amount,currency\n2026-01-02,harness sample,-1.00,EUR\n"

// checkImportFile streams a small file to ImportFile as the core does; a
// connector that does not implement it, or cannot read the sample, is
// skipped, and a delivery is judged by the same rules as Sync's.
func (r *run) checkImportFile(ctx context.Context) {
	if !r.has(plugins.CapabilityConnector) {
		r.set(CheckImportFile, Skip, "not a connector")
		return
	}
	const batch = "harness-file-1"
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	stream := r.connector().ImportFile(ctx)
	authorize(stream.RequestHeader(), r.rightToken())
	header := &connectorv1.FileHeader{BatchId: batch, Mode: connectorv1.IngestMode_INGEST_MODE_IMPORT, FileName: "harness.csv", MediaType: "text/csv"}
	err := stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Header{Header: header}})
	if err == nil {
		err = stream.Send(&connectorv1.ImportFileRequest{Message: &connectorv1.ImportFileRequest_Chunk{Chunk: []byte(sampleFile)}})
	}
	if err != nil && !errors.Is(err, io.EOF) {
		r.set(CheckImportFile, Fail, "sending the file failed: %s", describeAnswer(err))
		return
	}
	resp, err := stream.CloseAndReceive()
	switch code := connect.CodeOf(err); {
	case err == nil:
		r.judgeDelivery(CheckImportFile, "ImportFile", batch, deliveryrules.KindFile, resp.Msg.GetDelivery())
	case connect.IsWireError(err) && code == connect.CodeUnimplemented:
		r.set(CheckImportFile, Skip, "does not implement ImportFile")
	case connect.IsWireError(err) && code == connect.CodeInvalidArgument:
		r.set(CheckImportFile, Skip, "refused the harness's sample CSV as a file it cannot read (%s), as the contract allows", describeAnswer(err))
	default:
		r.judgeCallError(CheckImportFile, "ImportFile", err)
	}
}

// checkPages sends a view the same page twice, then the next: the contract
// (view.proto) has the core send a page again whenever it did not receive
// the view's OK, so a view must keep a page it already kept and answer OK.
func (r *run) checkPages(ctx context.Context) {
	if !r.has(plugins.CapabilityView) {
		r.set(CheckPages, Skip, "not a view")
		return
	}
	pages := []struct {
		what string
		req  *viewv1.ExportRequest
	}{
		{"the first page", samplePage(r.workload.DataTiers, true, 1, 2)},
		{"the first page again", samplePage(r.workload.DataTiers, true, 1, 2)},
		{"the next page", samplePage(r.workload.DataTiers, false, 3)},
	}
	for _, p := range pages {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		req := connect.NewRequest(p.req)
		authorize(req.Header(), r.rightToken())
		_, err := r.view().Export(cctx, req)
		cancel()
		switch {
		case err == nil:
		case connect.IsWireError(err) && connect.CodeOf(err) == connect.CodeUnavailable:
			r.set(CheckPages, Skip, "Export of %s answered unavailable (%s): the place it exports to is a stand-in that completes no TLS", p.what, describeAnswer(err))
			return
		case connect.IsWireError(err) && connect.CodeOf(err) == connect.CodeFailedPrecondition && r.needsOwner():
			r.set(CheckPages, Skip, "Export of %s answered failed_precondition (%s): the harness mounts the manifest's Secrets empty (only an owner has their keys) and grants no host of the owner's", p.what, describeAnswer(err))
			return
		default:
			r.set(CheckPages, Fail, "Export of %s answered %s, where the contract wants OK for a page kept (again)", p.what, describeAnswer(err))
			return
		}
	}
	r.set(CheckPages, Pass, "kept the same page twice and the next one, answering OK to each")
}

// samplePage is a page of FX rates, which need no data tier, with the
// given sequence numbers.
func samplePage(tiers []string, more bool, seqs ...uint64) *viewv1.ExportRequest {
	req := &viewv1.ExportRequest{RunId: "harness-run-1", DataTiers: tiers, More: more}
	for _, s := range seqs {
		req.Entries = append(req.Entries, &viewv1.Entry{
			Sequence: s, Source: "harness-fx",
			Institution: &connectorv1.Institution{Id: "harness", Name: "OpenFief conformance harness"},
			Entry: &viewv1.Entry_FxRate{FxRate: &connectorv1.FxRate{
				Date: fmt.Sprintf("2026-01-%02d", s), BaseCurrency: "EUR", QuoteCurrency: "PLN", Rate: "4.2" + fmt.Sprint(s),
			}},
		})
	}
	return req
}

// checkEgress judges what the plugin asked the egress proxy: only its
// declared hosts, and at most its owner slots' worth of others (the owner's
// hosts, which the harness cannot know), with its own egress token.
func (r *run) checkEgress() {
	allowed, denied := r.egress.snapshot()
	var owner, bad []string
	for _, d := range denied {
		host := d.target
		switch {
		case d.reason == egress.ReasonNotAllowed && !slices.Contains(owner, host) && len(owner) < r.manifest.OwnerSlots():
			owner = append(owner, host)
		case d.reason == egress.ReasonNotAllowed && slices.Contains(owner, host):
		default:
			bad = append(bad, host+" ("+d.reason+")")
		}
	}
	switch {
	case len(bad) > 0:
		r.set(CheckEgress, Fail, "the egress proxy refused: %s", display.Join(firstN(bad, 5), ", "))
	case len(allowed) == 0 && len(owner) == 0:
		r.set(CheckEgress, Pass, "asked the egress proxy for no host during the checks")
	default:
		reason := "reached only through the egress proxy: " + display.Join(allowed, ", ")
		if len(allowed) == 0 {
			reason = "asked the egress proxy for no declared host"
		}
		if len(owner) > 0 {
			reason += fmt.Sprintf("; %d host(s) for the owner's slots, refused here as the owner has granted none: %s", len(owner), display.Join(owner, ", "))
		}
		r.set(CheckEgress, Pass, "%s", reason)
	}
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}

// checkNetwork fails when the runtime saw the plugin try anything outside
// loopback: the pod's NetworkPolicy and missing DNS would refuse it.
func (r *run) checkNetwork() {
	if b, ok := r.rt.(Blind); ok {
		if why := b.CannotSee(); why != "" {
			r.set(CheckNetwork, Skip, "not judged: %s", why)
			return
		}
	}
	attempts := r.rt.Attempts()
	if len(attempts) == 0 {
		r.set(CheckNetwork, Pass, "tried no connection or DNS query except through the egress proxy")
		return
	}
	var seen []string
	for _, a := range attempts {
		s := clean(a.Protocol, 8) + " " + clean(a.Address, 80)
		if a.Protocol == "dns" && a.Query != "" {
			s = "dns " + clean(a.Query, 80)
		}
		if !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	r.set(CheckNetwork, Fail, "tried outside the egress proxy: %s", display.Join(firstN(seen, 5), ", "))
}

// stop sends SIGTERM and gives the plugin the grace period to exit (the
// sigterm check), then reads its usage (the resources check).
func (r *run) stop(ctx context.Context) {
	if st, done := r.hasExited(); done {
		r.set(CheckSigterm, Skip, "the plugin had already exited (%s)", describeExit(st))
	} else if err := r.rt.Signal(syscall.SIGTERM); err != nil {
		r.set(CheckSigterm, Skip, "not judged: SIGTERM could not be sent: %v", err)
	} else {
		start := time.Now()
		select {
		case <-r.exitDone:
			r.set(CheckSigterm, Pass, "exited %s after SIGTERM (%s), within the %s grace period",
				time.Since(start).Round(time.Millisecond), describeExit(r.exitStatus), r.opts.GracePeriod)
		case <-time.After(r.opts.GracePeriod):
			r.set(CheckSigterm, Fail, "still running %s after SIGTERM, when the kubelet would kill it", r.opts.GracePeriod)
		case <-ctx.Done():
			r.set(CheckSigterm, Fail, "still running after SIGTERM when the run's time ran out")
		}
	}
	_ = r.rt.Close()
	select {
	case <-r.exitDone:
	case <-time.After(5 * time.Second):
	}
	r.checkResources()
}

// checkResources compares the plugin's peak memory with the container's
// memory limit (its memory and its in-memory /tmp); CPU is throttled at its
// limit, never fatal, so it is only reported.
func (r *run) checkResources() {
	u, err := r.rt.Usage()
	if err != nil {
		r.set(CheckResources, Skip, "not measured: %s", clean(err.Error(), 200))
		return
	}
	limit := r.workload.Resources.MemoryBytes
	cpu := fmt.Sprintf("%.2f CPU seconds (limit %s)", u.CPUSeconds, plugins.FormatCPU(r.workload.Resources.CPULimitMilli))
	switch {
	case u.OOMKilled:
		r.set(CheckResources, Fail, "killed for running out of memory (limit %s)", plugins.FormatMemory(limit))
	case u.PeakMemoryBytes > limit:
		r.set(CheckResources, Fail, "peak memory %s, over the limit of %s (memory and /tmp); %s", mib(u.PeakMemoryBytes), plugins.FormatMemory(limit), cpu)
	default:
		r.set(CheckResources, Pass, "peak memory %s of %s; %s", mib(u.PeakMemoryBytes), plugins.FormatMemory(limit), cpu)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1fMi", float64(b)/float64(plugins.Mi)) }
