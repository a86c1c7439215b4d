package nbpfx

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/connectors"
	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
	"github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1/connectorv1connect"
)

// maxRangeDays is the longest range, in days counted inclusively, that one
// NBP query may ask for.
const maxRangeDays = 93

// maxRangesWithData bounds how many ranges that returned tables one sync
// reads (about two years): a first sync from an early startDate then
// catches up over several syncs, each delivery staying small. The watermark
// makes the next sync go on where this one stopped.
const maxRangesWithData = 8

// Institution is who nbp-fx's deliveries come from.
var Institution = &connectorv1.Institution{Id: "nbp", Name: "Narodowy Bank Polski"}

// Connector is the nbp-fx adapter: a ConnectorService handler whose Sync
// delivers NBP's table A mid rates (D-49). Build it with New.
type Connector struct {
	connectorv1connect.UnimplementedConnectorServiceHandler

	base   *url.URL
	cfg    Config
	client *http.Client
	now    func() time.Time
}

// Option configures a Connector.
type Option func(*Connector)

// WithHTTPClient sets the client NBP is reached with. The plugin's main
// passes the SDK's egress client (D-63); tests pass a loopback one.
func WithHTTPClient(c *http.Client) Option { return func(k *Connector) { k.client = c } }

// WithClock sets the clock that decides what "today" is (in UTC).
func WithClock(now func() time.Time) Option { return func(k *Connector) { k.now = now } }

// New returns the connector for cfg, refusing a config that breaks its
// rules (Config.Validate). Without WithHTTPClient every sync fails: nbp-fx
// reaches NBP only through the client it is given.
func New(cfg Config, opts ...Option) (*Connector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	base, err := connectors.ParseBaseURL(cmp.Or(cfg.BaseURL, DefaultBaseURL))
	if err != nil {
		return nil, fmt.Errorf("config: baseURL: %w", err)
	}
	c := &Connector{base: base, cfg: cfg, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Sync delivers the table A rates NBP published for the days after the
// request's watermark (a YYYY-MM-DD date, or empty on the first sync) up to
// today in UTC, with the effective date of the latest table as the new
// watermark; when there is none, the watermark stays as it was (D-49).
func (c *Connector) Sync(ctx context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	d, err := c.sync(ctx, req.Msg.GetBatchId(), req.Msg.GetWatermark())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: d}), nil
}

func (c *Connector) sync(ctx context.Context, batchID, watermark string) (*connectorv1.Delivery, error) {
	if batchID == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no batch_id"))
	}
	today := civilDay(c.now())
	var from time.Time
	if watermark == "" {
		from = c.cfg.startDate(today)
	} else {
		last, err := time.Parse(delivery.DateLayout, watermark)
		if err != nil || !delivery.IsDate(watermark) {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("watermark %q is not a YYYY-MM-DD date", truncate(watermark)))
		}
		from = last.AddDate(0, 0, 1)
	}
	b := delivery.NewBuilder(batchID, Institution)
	col := newCollector(b, c.cfg.Currencies)
	withData := 0
	for start := from; !start.After(today) && withData < maxRangesWithData; start = start.AddDate(0, 0, maxRangeDays) {
		end := start.AddDate(0, 0, maxRangeDays-1)
		if end.After(today) {
			end = today
		}
		s, e := delivery.Date(start), delivery.Date(end)
		tables, err := c.fetch(ctx, s, e)
		if err != nil {
			return nil, err
		}
		if len(tables) == 0 {
			continue
		}
		withData++
		if err := col.add(tables, s, e); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
	}
	col.finish()
	next := watermark
	if col.latest != "" {
		next = col.latest
	}
	d, err := b.Build(next)
	if err != nil {
		// Everything was checked while mapping; a delivery that still
		// breaks the contract is this connector's bug.
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("build delivery: %w", err))
	}
	return d, nil
}

// fetch asks NBP for the tables of the days from..to. NBP's 404 "Brak
// danych" (no data) is no tables; any other failure is CodeUnavailable and
// an answer it cannot read CodeInvalidArgument.
func (c *Connector) fetch(ctx context.Context, from, to string) ([]table, error) {
	if c.client == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("NBP: no HTTP client configured"))
	}
	u := *c.base
	u.Path = "/api/exchangerates/tables/A/" + from + "/" + to + "/"
	u.RawQuery = "format=json"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("NBP request: %w", err))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		return nil, transportError(ctx, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && strings.Contains(strings.ToLower(string(body)), "brak danych"):
		return nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("NBP answered %s for %s to %s", resp.Status, from, to))
	case len(body) > maxBodyBytes:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%w: larger than %d bytes", errUnreadable, maxBodyBytes))
	}
	tables, err := parseTables(body)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return tables, nil
}

// transportError maps an error reaching NBP: the caller's cancellation keeps
// its code; everything else is NBP, or the way to it, failing.
func transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("reach NBP: %w", err))
}

// civilDay is t's calendar day in UTC, at midnight.
func civilDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
