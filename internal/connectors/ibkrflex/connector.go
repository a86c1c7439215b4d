package ibkrflex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/arkadiuss/openfief/internal/connectors"
	openfief "github.com/arkadiuss/openfief/sdk/go"
	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// servicePath is the Flex Web Service's path on its host (version 3).
const servicePath = "/AccountManagement/FlexWebService/"

// userAgent is sent with every request; the Flex Web Service refuses
// requests without one.
const userAgent = "openfief-ibkr-flex/1"

// defaultPollDelays are the waits between GetStatement polls while IBKR
// generates the statement: about a minute in all.
var defaultPollDelays = []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 25 * time.Second}

// Flex Web Service error codes that mean the statement is not ready yet or
// IBKR is busy: GetStatement is polled again.
var notReadyCodes = map[string]bool{
	"1001": true, "1004": true, "1005": true, "1006": true, "1007": true,
	"1008": true, "1009": true, "1018": true, "1019": true, "1021": true,
}

// Flex Web Service error codes that mean the owner's token or query is
// refused: retrying does not help.
var credentialCodes = map[string]bool{
	"1010": true, "1011": true, "1012": true, "1013": true, "1014": true, "1015": true, "1016": true,
}

var (
	digits     = regexp.MustCompile(`^[0-9]{1,32}$`)
	errorCodes = regexp.MustCompile(`^[0-9]{1,6}$`)
)

// Connector is the ibkr-flex adapter: a ConnectorService handler that
// fetches Flex statements on Sync and maps uploaded ones on ImportFile
// (D-49). Build it with New.
type Connector struct {
	cfg        Config
	base       *url.URL
	client     *http.Client
	credsDir   string
	pollDelays []time.Duration
	sleep      func(context.Context, time.Duration) error
}

// Option configures a Connector.
type Option func(*Connector)

// WithHTTPClient sets the client IBKR is reached with. The plugin's main
// passes the SDK's egress client (D-63); tests pass a loopback one.
func WithHTTPClient(c *http.Client) Option { return func(k *Connector) { k.client = c } }

// WithCredentialsDir sets the directory holding the token and query-id
// files; DefaultCredentialsDir, the manifest's mount path, by default.
func WithCredentialsDir(dir string) Option { return func(k *Connector) { k.credsDir = dir } }

// WithPollDelays sets the waits between GetStatement polls; the statement
// is asked for len(delays)+1 times before Sync gives up with Unavailable.
func WithPollDelays(delays ...time.Duration) Option {
	return func(k *Connector) { k.pollDelays = delays }
}

// New returns the connector for cfg, refusing a config that breaks its
// rules (Config.Validate). Without WithHTTPClient every sync fails.
func New(cfg Config, opts ...Option) (*Connector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	base, err := connectors.ParseBaseURL(cmp.Or(cfg.BaseURL, DefaultBaseURL))
	if err != nil {
		return nil, fmt.Errorf("config: baseURL: %w", err)
	}
	c := &Connector{cfg: cfg, base: base, credsDir: DefaultCredentialsDir, pollDelays: defaultPollDelays, sleep: sleep}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Sync fetches the Flex Query's statement and maps it (D-49). The query
// sets its own period and a re-import changes nothing (D-18), so the
// delivery carries the watermark the request did.
func (c *Connector) Sync(ctx context.Context, req *connect.Request[connectorv1.SyncRequest]) (*connect.Response[connectorv1.SyncResponse], error) {
	if req.Msg.GetBatchId() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no batch_id"))
	}
	body, err := c.fetchStatement(ctx)
	if err != nil {
		return nil, err
	}
	d, err := c.deliver(req.Msg.GetBatchId(), body, req.Msg.GetWatermark())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&connectorv1.SyncResponse{Delivery: d}), nil
}

// ImportFile maps an uploaded Flex XML statement of at most 32 MiB, exactly
// as Sync maps a fetched one (D-49).
func (c *Connector) ImportFile(_ context.Context, stream *connect.ClientStream[connectorv1.ImportFileRequest]) (*connect.Response[connectorv1.ImportFileResponse], error) {
	f, err := openfief.ReceiveFile(stream, maxStatementBytes)
	if err != nil {
		return nil, err
	}
	d, err := c.deliver(f.Header.GetBatchId(), f.Content, "")
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&connectorv1.ImportFileResponse{Delivery: d}), nil
}

// deliver maps a statement into the delivery for batchID.
func (c *Connector) deliver(batchID string, body []byte, watermark string) (*connectorv1.Delivery, error) {
	st, err := readStatement(body)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	b := delivery.NewBuilder(batchID, Institution)
	mapStatement(c.cfg, b, st)
	d, err := b.Build(watermark)
	if err != nil {
		// Every row was checked while mapping; a delivery that still
		// breaks the contract is this connector's bug.
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("build delivery: %w", err))
	}
	return d, nil
}

// readStatement parses a Flex statement, telling a status answer (such as
// an error IBKR wrote instead of a statement) from an unreadable file.
func readStatement(body []byte) (*flexQueryResponse, error) {
	root, err := rootName(body)
	if err != nil {
		return nil, err
	}
	if root != "FlexQueryResponse" {
		return nil, fmt.Errorf("%w: root element %q is not FlexQueryResponse", errUnreadable, truncate(root))
	}
	return parseStatement(body)
}

// credentials reads the Flex token and query ID from their Secret files,
// afresh on every call, through an os.Root of their directory. Errors name
// the files, never their content.
func (c *Connector) credentials() (token, query string, err error) {
	tf, err := openfief.NewTokenFile(filepath.Join(c.credsDir, "token"))
	if err == nil {
		token, err = tf.Read()
	}
	if err != nil {
		return "", "", connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("read the Flex token: %w", err))
	}
	qf, err := openfief.NewTokenFile(filepath.Join(c.credsDir, "query-id"))
	if err == nil {
		query, err = qf.Read()
	}
	if err == nil && !digits.MatchString(query) {
		err = fmt.Errorf("%s does not hold a numeric query ID", qf.Path())
	}
	if err != nil {
		return "", "", connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("read the Flex query ID: %w", err))
	}
	return token, query, nil
}

// fetchStatement runs the Flex Web Service's two steps: SendRequest for a
// reference code, then GetStatement until the statement is ready.
func (c *Connector) fetchStatement(ctx context.Context) ([]byte, error) {
	token, query, err := c.credentials()
	if err != nil {
		return nil, err
	}
	secrets := []string{token, query}
	body, err := c.get(ctx, "SendRequest", token, query, secrets)
	if err != nil {
		return nil, err
	}
	status, err := parseStatus(body)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("SendRequest: %s", scrub(err.Error(), secrets)))
	}
	if !strings.EqualFold(status.Status, "Success") {
		return nil, statusError("SendRequest", status, secrets)
	}
	ref := strings.TrimSpace(status.ReferenceCode)
	if !digits.MatchString(ref) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("SendRequest: the answer has no numeric reference code"))
	}
	secrets = append(secrets, ref)
	for attempt := 0; ; attempt++ {
		body, err := c.get(ctx, "GetStatement", token, ref, secrets)
		if err != nil {
			return nil, err
		}
		root, err := rootName(body)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("GetStatement: %s", scrub(err.Error(), secrets)))
		}
		if root != "FlexStatementResponse" {
			return body, nil
		}
		status, err := parseStatus(body)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("GetStatement: %s", scrub(err.Error(), secrets)))
		}
		if !notReadyCodes[strings.TrimSpace(status.ErrorCode)] {
			return nil, statusError("GetStatement", status, secrets)
		}
		if attempt >= len(c.pollDelays) {
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("GetStatement: the statement is not ready after %d tries (IBKR error %s)", attempt+1, safeCode(status.ErrorCode)))
		}
		if err := c.sleep(ctx, c.pollDelays[attempt]); err != nil {
			return nil, contextError(err)
		}
	}
}

// get sends one Flex Web Service request, step "SendRequest" or
// "GetStatement", with t=token, q=q and v=3, and returns the answer's body.
// No error it returns holds the URL or any of secrets.
func (c *Connector) get(ctx context.Context, step, token, q string, secrets []string) ([]byte, error) {
	if c.client == nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: no HTTP client configured", step))
	}
	u := *c.base
	u.Path = servicePath + step
	u.RawQuery = url.Values{"t": {token}, "q": {q}, "v": {"3"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("%s: cannot build the request", step))
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, contextError(ctx.Err())
		}
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: %s", step, scrub(withoutURL(err), secrets)))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatementBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, contextError(ctx.Err())
		}
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: reading the answer: %s", step, scrub(withoutURL(err), secrets)))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: IBKR answered HTTP %d", step, resp.StatusCode))
	}
	if len(body) > maxStatementBytes {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %w: larger than %d bytes", step, errUnreadable, maxStatementBytes))
	}
	return body, nil
}

// statusError maps a FlexStatementResponse that is not a success: refused
// credentials are CodeFailedPrecondition, anything else CodeUnavailable.
func statusError(step string, s *statusResponse, secrets []string) error {
	code := strings.TrimSpace(s.ErrorCode)
	err := fmt.Errorf("%s: IBKR error %s: %s", step, safeCode(code), scrub(truncate(strings.TrimSpace(s.ErrorMessage)), secrets))
	if credentialCodes[code] {
		return connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// safeCode returns a Flex error code for a message, or "?" when it is not
// one.
func safeCode(code string) string {
	code = strings.TrimSpace(code)
	if !errorCodes.MatchString(code) {
		return "?"
	}
	return code
}

// withoutURL returns err's message without the request URL, which carries
// the token: *url.Error's Error() quotes it.
func withoutURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// scrub replaces every secret in msg, so no error ever carries one.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			msg = strings.ReplaceAll(msg, url.QueryEscape(s), "[redacted]")
		}
	}
	return msg
}

// contextError keeps the code of the caller's cancellation or deadline.
func contextError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeCanceled, err)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
