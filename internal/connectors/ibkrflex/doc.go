// Package ibkrflex is the adapter of the ibkr-flex connector plugin:
// Interactive Brokers statements from the Flex Web Service, or uploaded as
// Flex XML files, mapped to transactions with postings (D-49).
//
// A Sync reads the Flex token and query ID from their Secret files on every
// call (the ibkr-flex-credentials slot, mounted at /etc/openfief/ibkr-flex:
// files token and query-id), asks SendRequest for a statement, then polls
// GetStatement until IBKR has generated it. Neither value is ever logged or
// put in an error: errors from the HTTP client, whose URLs carry them, are
// stripped of the URL and scrubbed. The Flex Query sets its own period, and
// importing a statement again changes nothing (D-18), so a Sync returns the
// watermark it was given. ImportFile maps an uploaded Flex XML statement
// the same way.
//
// Mapping, with OpenFief account IDs only from the config (never IBKR's
// account number), reads what the statement has, since that depends on the
// fields ticked in the Flex Query (plugins/ibkr-flex/README.md):
//   - Trades (level EXECUTION): the security leg on the account's
//     securities account at its cost (-proceeds) with the quantity, the cash
//     leg on the trade currency's cash account, commission and transaction
//     taxes on the commissions and fees categories. The date is tradeDate,
//     else dateTime's; proceeds are the proceeds attribute, else
//     -(quantity × tradePrice × multiplier) in exact decimals. FX
//     conversions (asset category CASH, symbol BASE.QUOTE) move cash between
//     two currencies through the fxConversion account, so every currency
//     balances. Asset categories are mapped by name (assets.go); futures and
//     CFDs are problems. The source ID is the transactionID, so a trade
//     cancelled and booked again is held once (trades.go).
//   - Cash transactions (level DETAIL): the amount on the cash account,
//     balanced by the category its type maps to (dividends, withholding tax,
//     interest, fees, deposits and withdrawals).
//   - Open positions (level SUMMARY): balance assertions of quantity and
//     value on the securities account, dated reportDate, else the
//     statement's toDate.
//
// Dates are read in every format the Flex Query offers (dates.go). A row it
// cannot map (an unknown account, currency or type, an unreadable number or
// date) is an ingest problem naming the row, and is left out. A reason that
// holds for a whole section or statement (a required field the query does
// not include, an account not in the config, slash dates whose order no date
// tells) is one problem for all its rows, with their number.
//
// IBKR failing, or a statement not ready after the last poll, is
// connect.CodeUnavailable (the core retries); a statement it cannot read is
// connect.CodeInvalidArgument; credentials IBKR refuses (an expired or
// invalid token, an invalid query) or Secret files it cannot read are
// connect.CodeFailedPrecondition, which a retry does not fix.
package ibkrflex
