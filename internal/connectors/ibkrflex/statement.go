package ibkrflex

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// maxStatementBytes bounds a statement, fetched or uploaded.
const maxStatementBytes = 32 << 20

// errUnreadable is wrapped by every error about a statement or an answer
// ibkr-flex cannot read; it becomes connect.CodeInvalidArgument.
var errUnreadable = errors.New("unreadable Flex XML")

// flexQueryResponse is a Flex statement as the Flex Web Service and Flex
// Query downloads write it: <FlexQueryResponse><FlexStatements>
// <FlexStatement accountId=...> with Trades, CashTransactions and
// OpenPositions, every value an XML attribute. Numbers stay text until a
// row is mapped, and are then read as exact decimals.
type flexQueryResponse struct {
	XMLName    xml.Name        `xml:"FlexQueryResponse"`
	Statements []flexStatement `xml:"FlexStatements>FlexStatement"`
}

type flexStatement struct {
	AccountID string            `xml:"accountId,attr"`
	Trades    []trade           `xml:"Trades>Trade"`
	Cash      []cashTransaction `xml:"CashTransactions>CashTransaction"`
	Positions []openPosition    `xml:"OpenPositions>OpenPosition"`
}

// instrumentFields are the attributes that describe a security.
type instrumentFields struct {
	AssetCategory string `xml:"assetCategory,attr"`
	Symbol        string `xml:"symbol,attr"`
	Description   string `xml:"description,attr"`
	ISIN          string `xml:"isin,attr"`
}

type trade struct {
	instrumentFields
	AccountID     string `xml:"accountId,attr"`
	Currency      string `xml:"currency,attr"`
	TradeID       string `xml:"tradeID,attr"`
	TransactionID string `xml:"transactionID,attr"`
	TradeDate     string `xml:"tradeDate,attr"`
	SettleDate    string `xml:"settleDateTarget,attr"`
	Quantity      string `xml:"quantity,attr"`
	TradePrice    string `xml:"tradePrice,attr"`
	Proceeds      string `xml:"proceeds,attr"`
	Taxes         string `xml:"taxes,attr"`
	Commission    string `xml:"ibCommission,attr"`
	CommissionCur string `xml:"ibCommissionCurrency,attr"`
	NetCash       string `xml:"netCash,attr"`
	BuySell       string `xml:"buySell,attr"`
	LevelOfDetail string `xml:"levelOfDetail,attr"`
}

type cashTransaction struct {
	instrumentFields
	AccountID     string `xml:"accountId,attr"`
	Currency      string `xml:"currency,attr"`
	DateTime      string `xml:"dateTime,attr"`
	ReportDate    string `xml:"reportDate,attr"`
	SettleDate    string `xml:"settleDate,attr"`
	Amount        string `xml:"amount,attr"`
	Type          string `xml:"type,attr"`
	TransactionID string `xml:"transactionID,attr"`
	LevelOfDetail string `xml:"levelOfDetail,attr"`
}

type openPosition struct {
	instrumentFields
	AccountID     string `xml:"accountId,attr"`
	Currency      string `xml:"currency,attr"`
	ReportDate    string `xml:"reportDate,attr"`
	Position      string `xml:"position,attr"`
	PositionValue string `xml:"positionValue,attr"`
	LevelOfDetail string `xml:"levelOfDetail,attr"`
}

// statusResponse is the Flex Web Service's answer to SendRequest, and to a
// GetStatement whose statement is not ready or failed:
//
//	<FlexStatementResponse timestamp="..."><Status>Success</Status>
//	<ReferenceCode>1234567890</ReferenceCode><Url>...</Url></FlexStatementResponse>
//	<FlexStatementResponse timestamp="..."><Status>Warn</Status>
//	<ErrorCode>1019</ErrorCode><ErrorMessage>Statement generation in progress.
//	Please try again shortly.</ErrorMessage></FlexStatementResponse>
type statusResponse struct {
	XMLName       xml.Name `xml:"FlexStatementResponse"`
	Status        string   `xml:"Status"`
	ReferenceCode string   `xml:"ReferenceCode"`
	ErrorCode     string   `xml:"ErrorCode"`
	ErrorMessage  string   `xml:"ErrorMessage"`
}

// rootName returns the name of b's root element.
func rootName(b []byte) (string, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("%w: no root element: %v", errUnreadable, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name.Local, nil
		}
	}
}

// decodeXML decodes exactly one XML document from b into v: strict, UTF-8
// only, nothing but white space, comments or processing instructions after
// the root element. Go's decoder never reads external entities or a DTD.
func decodeXML(b []byte, v any) error {
	if len(b) > maxStatementBytes {
		return fmt.Errorf("%w: larger than %d bytes", errUnreadable, maxStatementBytes)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errUnreadable, err)
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errUnreadable, err)
		}
		switch t := tok.(type) {
		case xml.Comment, xml.ProcInst:
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return fmt.Errorf("%w: text after the root element", errUnreadable)
			}
		default:
			return fmt.Errorf("%w: data after the root element", errUnreadable)
		}
	}
}

// parseStatement reads a Flex statement (FlexQueryResponse).
func parseStatement(b []byte) (*flexQueryResponse, error) {
	var r flexQueryResponse
	if err := decodeXML(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// parseStatus reads a FlexStatementResponse.
func parseStatus(b []byte) (*statusResponse, error) {
	var r statusResponse
	if err := decodeXML(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// flexDate reads a Flex date as the query writes it, yyyyMMdd or
// yyyy-MM-dd, or the date part of a date-time (yyyyMMdd;HHmmss and the
// like), and returns it as YYYY-MM-DD.
func flexDate(s string) (string, error) {
	if i := strings.IndexAny(s, ";, T"); i >= 0 {
		s = s[:i]
	}
	for _, layout := range []string{"20060102", delivery.DateLayout} {
		if t, err := time.Parse(layout, s); err == nil && t.Format(layout) == s {
			return t.Format(delivery.DateLayout), nil
		}
	}
	return "", fmt.Errorf("date %q is not yyyyMMdd or yyyy-MM-dd (set the Flex Query's date format)", truncate(s))
}
