package ibkrflex

import (
	"strings"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// position maps one open position to a balance assertion of the
// securities account, dated by its reportDate or, without one, by the
// statement's toDate: the day the positions were taken.
func (m *mapper) position(s *section, p openPosition) (*connectorv1.BalanceAssertion, *rowError) {
	if (p.LevelOfDetail != "" && p.LevelOfDetail != "SUMMARY") || strings.EqualFold(p.AssetCategory, "CASH") {
		return nil, nil // lots repeat the summary; cash balances are not securities
	}
	acct, e := m.account(s, p.AccountID)
	if e != nil {
		return nil, e
	}
	if e := requireFields(s, "OpenPositions", "Open Positions", s.position, positionRequirements); e != nil {
		return nil, e
	}
	if p.AssetCategory != "" {
		if _, e := assetOf(p.AssetCategory); e != nil {
			return nil, e
		}
	}
	if acct.Securities == "" {
		return nil, rowErr(ProblemUnknownAccount, "the config maps no securities account for this IBKR account")
	}
	day, field := p.ReportDate, "reportDate"
	if day == "" {
		day, field = s.st.ToDate, "the statement's toDate"
	}
	if day == "" {
		if !s.position.has(fReportDate) {
			return nil, groupErr(s.at+"/OpenPositions", ProblemMissingFields,
				"the statement has no toDate and the Flex Query's Open Positions section includes no Report Date: in %s, edit the query, tick Report Date under Open Positions, and run it again", flexQueriesPage)
		}
		return nil, rowErr(ProblemUnreadableRow, "the position has no reportDate and the statement no toDate")
	}
	date, e := m.date(s, field, day)
	if e != nil {
		return nil, e
	}
	if !delivery.IsCurrency(p.Currency) {
		return nil, rowErr(ProblemUnreadableRow, "currency %q is not an ISO 4217 code", truncate(p.Currency))
	}
	qty, e := number("position", p.Position, false)
	if e != nil {
		return nil, e
	}
	in, e := instrument(p.instrumentFields, p.Currency)
	if e != nil {
		return nil, e
	}
	a := &connectorv1.BalanceAssertion{AccountId: acct.Securities, Date: date, Instrument: in, Quantity: qty.String()}
	if p.PositionValue != "" {
		v, e := number("positionValue", p.PositionValue, false)
		if e != nil {
			return nil, e
		}
		a.Amount, a.Currency = v.String(), p.Currency
	}
	return a, nil
}
