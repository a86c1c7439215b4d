package ibkrflex

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// wantTransactions, wantBalances and wantProblems are the mapping of
// testdata/statement.xml with testConfig: USD and EUR stock trades, an FX
// conversion, a commission charged in another currency, dividends with
// withholding tax, fees, interest and a deposit; rows of an unknown
// account, currency or type, an unreadable amount or date, and a repeated
// row become problems; ORDER, SUMMARY-cash and LOT rows are skipped.
var (
	wantTransactions = []string{
		"cash:2004 2026-03-01/2026-03-02 CASH RECEIPTS / ELECTRONIC FUND TRANSFERS | ibkr-eur 1000 EUR; transfers -1000 EUR (Deposits/Withdrawals)",
		"trade:9004 2026-03-01/2026-03-03 BUY 1000 EUR.USD @ 1.0853 USD | ibkr-eur 1000 EUR; fx-conversion -1000 EUR (currency conversion); ibkr-usd -1087.3 USD; fx-conversion 1085.3 USD (currency conversion); expense-commissions 2 USD (commission)",
		"trade:9001 2026-03-02/2026-03-04 BUY 10 AAPL @ 185.5 USD | ibkr-securities 1855 USD [10 AAPL US0378331005]; ibkr-usd -1856 USD; expense-commissions 1 USD (commission)",
		"cash:2003 2026-03-03 NYSE NETWORK A MARKET DATA FOR MAR 2026 | ibkr-usd -1.5 USD; expense-fees 1.5 USD (Other Fees)",
		"trade:9002 2026-03-03/2026-03-05 BUY 5 VWCE @ 117.66 EUR | ibkr-securities 588.3 EUR [5 VWCE IE00BK5BQT80]; ibkr-eur -589.55 EUR; expense-commissions 1.25 EUR (commission)",
		"cash:2005 2026-03-04 EUR CREDIT INT FOR FEB-2026 | ibkr-eur 0.57 EUR; income-interest -0.57 EUR (Broker Interest Received)",
		"cash:2001 2026-03-12 AAPL(US0378331005) CASH DIVIDEND USD 0.24 PER SHARE (Ordinary Dividend) | ibkr-usd 2.4 USD; income-dividends -2.4 USD (Dividends)",
		"cash:2002 2026-03-12 AAPL(US0378331005) CASH DIVIDEND USD 0.24 PER SHARE - US TAX | ibkr-usd -0.36 USD; expense-withholding-tax 0.36 USD (Withholding Tax)",
		"trade:9003 2026-03-16/2026-03-17 SELL -4 AAPL @ 190.1 USD | ibkr-securities -760.4 USD [-4 AAPL US0378331005]; ibkr-usd 759.38 USD; expense-commissions 1 USD (commission); expense-fees 0.02 USD (transaction tax)",
		// 0.1 + 0.2 stays exactly 0.3: with floats the legs would not balance.
		"trade:9005 2026-03-20 BUY 1 XYZ @ 0.1 USD | ibkr-securities 0.1 USD [1 XYZ ]; ibkr-usd -0.3 USD; expense-commissions 0.2 USD (commission)",
		"trade:9006 2026-03-23/2026-03-25 BUY 2 SAP @ 200 EUR | ibkr-securities 400 EUR [2 SAP DE0007164600]; ibkr-eur -400 EUR; ibkr-usd -1.5 USD (commission); expense-commissions 1.5 USD (commission)",
	}
	wantBalances = []string{
		"ibkr-securities 2026-03-31 590.1 EUR [5 VWCE]",
		"ibkr-securities 2026-03-31 1140.6 USD [6 AAPL]",
	}
	wantProblems = []string{
		`SEVERITY_ERROR unknown_account  FlexStatement[0]/Trades/Trade[7]: IBKR account "U7654321" is not in the config's accounts; the row is left out`,
		`SEVERITY_ERROR unreadable_row  FlexStatement[0]/Trades/Trade[8]: proceeds "-3,60" is not a decimal; the row is left out`,
		`SEVERITY_ERROR unknown_account  FlexStatement[0]/Trades/Trade[9]: the config maps no cash account for GBP; the row is left out`,
		`SEVERITY_ERROR unknown_cash_transaction_type  FlexStatement[0]/CashTransactions/CashTransaction[5]: cash transaction type "Price Adjustments" is not one ibkr-flex maps; the row is left out`,
		`SEVERITY_WARNING duplicate_row  FlexStatement[0]/CashTransactions/CashTransaction[7]: transaction cash:2001 appears again in the statement; the repeat is left out`,
		`SEVERITY_ERROR unreadable_row  FlexStatement[0]/CashTransactions/CashTransaction[8]: dateTime: date "03.12.2026" is not in a date format the Flex Query offers (yyyyMMdd, yyyy-MM-dd, MM/dd/yyyy, MM/dd/yy, dd/MM/yyyy, dd/MM/yy or dd-MMM-yy, optionally followed by HHmmss or HH:mm:ss); the row is left out`,
	}
)

// newTestConnector returns a connector for testConfig reaching fake, with
// credentials in credsDir and no wait between polls.
func newTestConnector(t *testing.T, fake *fakeFlex, credsDir string, polls int) *Connector {
	t.Helper()
	cfg := testConfig()
	cfg.BaseURL = fake.srv.URL
	c, err := New(cfg, WithHTTPClient(fake.srv.Client()), WithCredentialsDir(credsDir), WithPollDelays(make([]time.Duration, polls)...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func doSync(c *Connector, watermark string) (*connectorv1.Delivery, error) {
	resp, err := c.Sync(context.Background(), connect.NewRequest(&connectorv1.SyncRequest{BatchId: "batch-1", Watermark: watermark}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetDelivery(), nil
}

func checkStatementDelivery(t *testing.T, d *connectorv1.Delivery) {
	t.Helper()
	txs, balances, problems := renderAll(d)
	if diff := cmp.Diff(wantTransactions, txs); diff != "" {
		t.Errorf("transactions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantBalances, balances); diff != "" {
		t.Errorf("balances (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantProblems, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if err := delivery.Validate(d); err != nil {
		t.Errorf("delivery breaks the contract: %v", err)
	}
	for _, tx := range d.GetTransactions() {
		if off := delivery.Imbalance(tx); len(off) > 0 {
			t.Errorf("%s does not balance: %v", tx.GetSourceId(), off)
		}
		for _, p := range tx.GetPostings() {
			if strings.Contains(p.GetAccountId(), "U1234567") {
				t.Errorf("%s: account_id %q holds IBKR's account number", tx.GetSourceId(), p.GetAccountId())
			}
		}
	}
}

func TestSync(t *testing.T) {
	fake := newFakeFlex(t)
	fake.notReady = 2
	c := newTestConnector(t, fake, writeCredentials(t, testToken, testQuery), 3)
	d, err := doSync(c, "opaque-watermark")
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	checkStatementDelivery(t, d)
	if d.GetWatermark() != "opaque-watermark" || d.GetBatchId() != "batch-1" || d.GetInstitution().GetId() != "ibkr" {
		t.Errorf("watermark %q batch %q institution %v", d.GetWatermark(), d.GetBatchId(), d.GetInstitution())
	}
	if fake.sends != 1 || fake.gets != 3 {
		t.Errorf("%d SendRequest and %d GetStatement calls, want 1 and 3 (two 'not ready')", fake.sends, fake.gets)
	}
}

// TestSyncTwiceChangesNothing checks D-18: the same statement gives the same
// delivery, with the same source IDs and the watermark it was given.
func TestSyncTwiceChangesNothing(t *testing.T) {
	fake := newFakeFlex(t)
	c := newTestConnector(t, fake, writeCredentials(t, testToken, testQuery), 0)
	a, err := doSync(c, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := doSync(c, a.GetWatermark())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b, protocmp.Transform()); diff != "" {
		t.Errorf("second sync differs (-first +second):\n%s", diff)
	}
	if a.GetWatermark() != "" {
		t.Errorf("watermark %q, want the empty one it was given", a.GetWatermark())
	}
}

// TestCredentialsReadOnEverySync rotates the token in its Secret file
// between syncs: the next sync uses the new one without a restart.
func TestCredentialsReadOnEverySync(t *testing.T) {
	fake := newFakeFlex(t)
	dir := writeCredentials(t, testToken, testQuery)
	c := newTestConnector(t, fake, dir, 0)
	if _, err := doSync(c, ""); err != nil {
		t.Fatal(err)
	}
	const rotated = "999999999999999999999999"
	fake.mu.Lock()
	fake.token = rotated
	fake.mu.Unlock()
	if _, err := doSync(c, ""); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("old token after IBKR rotated it: %v, want FailedPrecondition", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := doSync(c, ""); err != nil {
		t.Fatalf("after the Secret was updated: %v", err)
	}
}

func TestSyncErrors(t *testing.T) {
	tests := map[string]struct {
		token, query string
		notReady     int
		polls        int
		send, get    http.HandlerFunc
		closed       bool
		wantCode     connect.Code
		wantMsg      string
	}{
		"no token file":                    {query: testQuery, wantCode: connect.CodeFailedPrecondition, wantMsg: "Flex token"},
		"no query-id file":                 {token: testToken, wantCode: connect.CodeFailedPrecondition, wantMsg: "Flex query ID"},
		"a query ID that is no number":     {token: testToken, query: "12ab", wantCode: connect.CodeFailedPrecondition, wantMsg: "numeric query ID"},
		"a token IBKR refuses":             {token: "111111111111111111111111", query: testQuery, wantCode: connect.CodeFailedPrecondition, wantMsg: "IBKR error 1015: Token is invalid."},
		"a query IBKR refuses":             {token: testToken, query: "55555", wantCode: connect.CodeFailedPrecondition, wantMsg: "IBKR error 1014"},
		"an expired token":                 {send: answerFile(t, 200, "token-expired.xml"), wantCode: connect.CodeFailedPrecondition, wantMsg: "IBKR error 1012: Token has expired."},
		"too many requests":                {send: answerFile(t, 200, "too-many-requests.xml"), wantCode: connect.CodeUnavailable, wantMsg: "IBKR error 1018"},
		"statement never ready":            {notReady: 100, polls: 2, wantCode: connect.CodeUnavailable, wantMsg: "not ready after 3 tries (IBKR error 1019)"},
		"GetStatement fails for good":      {get: answerFile(t, 200, "token-expired.xml"), wantCode: connect.CodeFailedPrecondition, wantMsg: "GetStatement: IBKR error 1012"},
		"IBKR answers 500":                 {send: answerFile(t, 500, "html.html"), wantCode: connect.CodeUnavailable, wantMsg: "HTTP 500"},
		"IBKR answers 503 on GetStatement": {get: answerFile(t, 503, "html.html"), wantCode: connect.CodeUnavailable, wantMsg: "HTTP 503"},
		"IBKR cannot be reached":           {closed: true, wantCode: connect.CodeUnavailable, wantMsg: "SendRequest"},
		"an HTML page instead of XML":      {send: answerFile(t, 200, "html.html"), wantCode: connect.CodeInvalidArgument, wantMsg: "unreadable Flex XML"},
		"a truncated statement":            {get: answerFile(t, 200, "statement-truncated.xml"), wantCode: connect.CodeInvalidArgument, wantMsg: "unreadable Flex XML"},
		"no reference code":                {send: answerFile(t, 200, "in-progress.xml"), wantCode: connect.CodeUnavailable, wantMsg: "IBKR error 1019"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFakeFlex(t)
			fake.notReady, fake.sendAnswer, fake.getAnswer = tc.notReady, tc.send, tc.get
			token, query := tc.token, tc.query
			if token == "" && query == "" {
				token, query = testToken, testQuery
			}
			c := newTestConnector(t, fake, writeCredentials(t, token, query), tc.polls)
			if tc.closed {
				fake.srv.Close()
			}
			_, err := doSync(c, "")
			if got := connect.CodeOf(err); got != tc.wantCode {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.wantCode)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
			for _, secret := range []string{testToken, token, query} {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("error %q holds a credential", err)
				}
			}
		})
	}
}

// TestErrorsNeverHoldTheToken makes the HTTP client fail in ways whose
// errors quote the request URL, which carries the token.
func TestErrorsNeverHoldTheToken(t *testing.T) {
	fake := newFakeFlex(t)
	cfg := testConfig()
	cfg.BaseURL = fake.srv.URL
	// The default client does not trust the fake's certificate: the TLS
	// error is a *url.Error quoting the URL with t=<token>.
	c, err := New(cfg, WithHTTPClient(&http.Client{}), WithCredentialsDir(writeCredentials(t, testToken, testQuery)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = doSync(c, "")
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), "t=") {
		t.Errorf("error %q holds the token or the URL", err)
	}
	if got := scrub("x "+testToken+" y "+testQuery, []string{testToken, testQuery}); got != "x [redacted] y [redacted]" {
		t.Errorf("scrub = %q", got)
	}
}

func TestSyncCanceled(t *testing.T) {
	fake := newFakeFlex(t)
	fake.notReady = 100
	cfg := testConfig()
	cfg.BaseURL = fake.srv.URL
	c, err := New(cfg, WithHTTPClient(fake.srv.Client()), WithCredentialsDir(writeCredentials(t, testToken, testQuery)), WithPollDelays(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Sync(ctx, connect.NewRequest(&connectorv1.SyncRequest{BatchId: "b"}))
	if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Errorf("err = %v, want DeadlineExceeded while waiting between polls", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := testConfig()
	tests := map[string]struct {
		edit    func(*Config)
		wantErr string
	}{
		"the test config": {edit: func(*Config) {}},
		"only cash": {edit: func(c *Config) {
			c.Categories = Categories{}
			c.Accounts = map[string]Account{"DU1": {Cash: map[string]string{"USD": "a"}}}
		}},
		"no accounts":          {edit: func(c *Config) { c.Accounts = nil }, wantErr: "accounts: at least one"},
		"a bad IBKR account":   {edit: func(c *Config) { c.Accounts["U-1"] = Account{Cash: map[string]string{"USD": "a"}} }, wantErr: `"U-1" is not an IBKR account ID`},
		"no cash":              {edit: func(c *Config) { c.Accounts["U2"] = Account{} }, wantErr: "accounts.U2.cash: at least one currency"},
		"a bad currency":       {edit: func(c *Config) { c.Accounts["U2"] = Account{Cash: map[string]string{"usd": "a"}} }, wantErr: `"usd" is not an ISO 4217 code`},
		"an empty account ID":  {edit: func(c *Config) { c.Accounts["U2"] = Account{Cash: map[string]string{"USD": ""}} }, wantErr: "accounts.U2.cash.USD"},
		"an empty category":    {edit: func(c *Config) { c.Categories.Fees = strings.Repeat("x", 129) }, wantErr: "categories.fees"},
		"plain http":           {edit: func(c *Config) { c.BaseURL = "http://ndcdyn.interactivebrokers.com" }, wantErr: "baseURL: must be an https URL"},
		"a base URL with path": {edit: func(c *Config) { c.BaseURL = DefaultBaseURL + "/AccountManagement" }, wantErr: "baseURL: must not have a path"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			cfg.Accounts = map[string]Account{}
			for k, v := range ok.Accounts {
				cfg.Accounts[k] = v
			}
			tc.edit(&cfg)
			err := cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want %q", err, tc.wantErr)
			}
			if _, err := New(cfg); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
}

func TestReadDate(t *testing.T) {
	tests := map[string]struct {
		order dateOrder
		want  string // empty: an error
	}{
		"20260302":             {want: "2026-03-02"},
		"2026-03-02":           {want: "2026-03-02"},
		"20260312;202000":      {want: "2026-03-12"},
		"20260312,202000":      {want: "2026-03-12"},
		"20260312 202000":      {want: "2026-03-12"},
		"20260312202000":       {want: "2026-03-12"},
		"2026-03-12;20:20:00":  {want: "2026-03-12"},
		"2026-03-12, 20:20:00": {want: "2026-03-12"},
		"2026-03-1220:20:00":   {want: "2026-03-12"},
		"12-Mar-26":            {want: "2026-03-12"},
		"12-MAR-26;202000":     {want: "2026-03-12"},
		"03/12/2026":           {order: orderMonthFirst, want: "2026-03-12"},
		"03/12/2026 20:20:00":  {order: orderMonthFirst, want: "2026-03-12"},
		"03/12/26":             {order: orderMonthFirst, want: "2026-03-12"},
		"12/03/2026;202000":    {order: orderDayFirst, want: "2026-03-12"},
		"12/03/26,20:20:00":    {order: orderDayFirst, want: "2026-03-12"},
		"13/03/2026":           {order: orderMonthFirst},
		"20260230":             {},
		"12/03/2026":           {},
		"03.12.2026":           {},
		"":                     {},
		"2026032":              {},
		"20260312;2020":        {},
		"20260312;252000":      {},
		"20260312;202000 EST":  {},
		"2026-03-12T20:20:00":  {},
	}
	for in, tc := range tests {
		got, err := tc.order.read(in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("read(%q) with order %d = %q, %v; want %q", in, tc.order, got, err, tc.want)
		}
	}
}

func TestDateOrderOf(t *testing.T) {
	tests := map[string]struct {
		dates []string
		want  dateOrder
	}{
		"no slash dates":          {dates: []string{"20260312", "2026-03-13"}, want: orderUnknown},
		"no day after the 12th":   {dates: []string{"03/12/2026", "01/02/26"}, want: orderUnknown},
		"a month cannot be 13":    {dates: []string{"03/12/2026", "13/03/2026;101010"}, want: orderDayFirst},
		"a month cannot be 31":    {dates: []string{"", "12/31/25 10:10:10"}, want: orderMonthFirst},
		"both cannot hold":        {dates: []string{"13/03/2026", "03/13/2026"}, want: orderConflicting},
		"not digits":              {dates: []string{"ab/cd/2026"}, want: orderUnknown},
		"a dd-MMM-yy date is not": {dates: []string{"13-Mar-26"}, want: orderUnknown},
	}
	for name, tc := range tests {
		if got := dateOrderOf(tc.dates); got != tc.want {
			t.Errorf("%s: dateOrderOf(%q) = %d, want %d", name, tc.dates, got, tc.want)
		}
	}
}
