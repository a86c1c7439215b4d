package ibkrflex

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// maxStatementBytes bounds a statement, fetched or uploaded.
const maxStatementBytes = 32 << 20

// errUnreadable is wrapped by every error about a statement or an answer
// ibkr-flex cannot read; it becomes connect.CodeInvalidArgument.
var errUnreadable = errors.New("unreadable Flex XML")

// flexQueryResponse is a Flex statement as the Flex Web Service and Flex
// Query downloads write it: <FlexQueryResponse><FlexStatements>
// <FlexStatement accountId=...> with Trades, CashTransactions and
// OpenPositions, every value an XML attribute. A query for several accounts
// writes one FlexStatement each. Numbers stay text until a row is mapped,
// and are then read as exact decimals. Which attributes a row carries
// depends on the fields ticked in the Flex Query; each row records the ones
// ibkr-flex needs to know about (fields.go).
type flexQueryResponse struct {
	XMLName    xml.Name        `xml:"FlexQueryResponse"`
	Statements []flexStatement `xml:"FlexStatements>FlexStatement"`
}

type flexStatement struct {
	AccountID string            `xml:"accountId,attr"`
	FromDate  string            `xml:"fromDate,attr"`
	ToDate    string            `xml:"toDate,attr"`
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
	Multiplier    string `xml:"multiplier,attr"`
}

type trade struct {
	instrumentFields
	AccountID         string `xml:"accountId,attr"`
	Currency          string `xml:"currency,attr"`
	TradeID           string `xml:"tradeID,attr"`
	TransactionID     string `xml:"transactionID,attr"`
	OrigTransactionID string `xml:"origTransactionID,attr"`
	TransactionType   string `xml:"transactionType,attr"`
	Notes             string `xml:"notes,attr"`
	TradeDate         string `xml:"tradeDate,attr"`
	DateTime          string `xml:"dateTime,attr"`
	SettleDate        string `xml:"settleDateTarget,attr"`
	Quantity          string `xml:"quantity,attr"`
	TradePrice        string `xml:"tradePrice,attr"`
	Proceeds          string `xml:"proceeds,attr"`
	Taxes             string `xml:"taxes,attr"`
	Commission        string `xml:"ibCommission,attr"`
	CommissionCur     string `xml:"ibCommissionCurrency,attr"`
	NetCash           string `xml:"netCash,attr"`
	BuySell           string `xml:"buySell,attr"`
	LevelOfDetail     string `xml:"levelOfDetail,attr"`
	present           fieldSet
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
	present       fieldSet
}

type openPosition struct {
	instrumentFields
	AccountID     string `xml:"accountId,attr"`
	Currency      string `xml:"currency,attr"`
	ReportDate    string `xml:"reportDate,attr"`
	Position      string `xml:"position,attr"`
	PositionValue string `xml:"positionValue,attr"`
	LevelOfDetail string `xml:"levelOfDetail,attr"`
	present       fieldSet
}

// UnmarshalXML decodes a Trade and records which tracked attributes it
// carries.
func (t *trade) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	type plain trade
	if err := d.DecodeElement((*plain)(t), &start); err != nil {
		return err
	}
	t.present = presentFields(start.Attr)
	return nil
}

// UnmarshalXML decodes a CashTransaction and records which tracked
// attributes it carries.
func (c *cashTransaction) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	type plain cashTransaction
	if err := d.DecodeElement((*plain)(c), &start); err != nil {
		return err
	}
	c.present = presentFields(start.Attr)
	return nil
}

// UnmarshalXML decodes an OpenPosition and records which tracked
// attributes it carries.
func (p *openPosition) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	type plain openPosition
	if err := d.DecodeElement((*plain)(p), &start); err != nil {
		return err
	}
	p.present = presentFields(start.Attr)
	return nil
}

// dates returns every date and date-time the response holds, from which
// dateOrderOf tells how its slash dates are read.
func (r *flexQueryResponse) dates() []string {
	var out []string
	for _, st := range r.Statements {
		out = append(out, st.FromDate, st.ToDate)
		for _, t := range st.Trades {
			out = append(out, t.TradeDate, t.DateTime, t.SettleDate)
		}
		for _, c := range st.Cash {
			out = append(out, c.DateTime, c.ReportDate, c.SettleDate)
		}
		for _, p := range st.Positions {
			out = append(out, p.ReportDate)
		}
	}
	return out
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
