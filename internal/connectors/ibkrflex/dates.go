package ibkrflex

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// The owner picks a Flex Query's date format, time format and the separator
// between them when creating the query; every date and date-time in the
// statement is then written that way. ibkr-flex reads each choice the
// portal offers:
//
//	date format:  yyyyMMdd, yyyy-MM-dd, MM/dd/yyyy, MM/dd/yy, dd/MM/yyyy, dd/MM/yy, dd-MMM-yy
//	separator:    ";" (semicolon), "," (comma), " " (single space), none
//	time format:  HHmmss, HH:mm:ss
//
// A slash date alone does not say whether the day or the month comes
// first; the statement as a whole does when any of its dates has a day
// after the 12th (see dateOrderOf), and is never guessed (OF-20). Only the
// date is kept: the record has no time of day.

// dateLayout is one date format the Flex Query offers, as a Go layout.
type dateLayout struct {
	layout string
	order  dateOrder // the order a slash format needs; orderUnknown for the others
}

// dateLayouts are the date formats, each of a fixed width.
var dateLayouts = []dateLayout{
	{layout: "20060102"},
	{layout: "2006-01-02"},
	{layout: "02-Jan-06"},
	{layout: "01/02/2006", order: orderMonthFirst},
	{layout: "02/01/2006", order: orderDayFirst},
	{layout: "01/02/06", order: orderMonthFirst},
	{layout: "02/01/06", order: orderDayFirst},
}

// timeLayouts are the time formats.
var timeLayouts = []string{"150405", "15:04:05"}

// dateTimeSeparators are the separators between a date and its time, the
// longest first, and none. ", " is how older statements wrote the comma.
var dateTimeSeparators = []string{", ", ";", ",", " ", ""}

// dateFormatsHelp lists the formats for a problem's message.
const dateFormatsHelp = "yyyyMMdd, yyyy-MM-dd, MM/dd/yyyy, MM/dd/yy, dd/MM/yyyy, dd/MM/yy or dd-MMM-yy, optionally followed by HHmmss or HH:mm:ss"

// dateOrder is how a statement's slash dates are read.
type dateOrder int

const (
	// orderUnknown: no slash date in the statement has a day after the
	// 12th, so the order cannot be told.
	orderUnknown dateOrder = iota
	// orderMonthFirst: MM/dd.
	orderMonthFirst
	// orderDayFirst: dd/MM.
	orderDayFirst
	// orderConflicting: some dates can only be MM/dd and others only
	// dd/MM; none is read.
	orderConflicting
)

// errAmbiguousDate is a slash date whose order the statement does not
// tell.
var errAmbiguousDate = errors.New("ambiguous slash date")

// dateOrderOf tells the order of day and month from every date of the
// statement: a first number above 12 can only be a day, a second one only a
// day too.
func dateOrderOf(values []string) dateOrder {
	var dayFirst, monthFirst bool
	for _, v := range values {
		a, b, ok := slashNumbers(v)
		if !ok {
			continue
		}
		dayFirst = dayFirst || a > 12
		monthFirst = monthFirst || b > 12
	}
	switch {
	case dayFirst && monthFirst:
		return orderConflicting
	case dayFirst:
		return orderDayFirst
	case monthFirst:
		return orderMonthFirst
	}
	return orderUnknown
}

// slashNumbers returns the two numbers before the year of a date written
// nn/nn/yy[yy].
func slashNumbers(s string) (a, b int, ok bool) {
	if len(s) < 8 || s[2] != '/' || s[5] != '/' {
		return 0, 0, false
	}
	for _, c := range s[:2] + s[3:5] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), int(s[3]-'0')*10 + int(s[4]-'0'), true
}

// isSlashDate reports whether s starts like a slash date.
func isSlashDate(s string) bool {
	_, _, ok := slashNumbers(s)
	return ok
}

// read returns the date of a Flex date or date-time as YYYY-MM-DD. A slash
// date the statement gives no order for is errAmbiguousDate.
func (o dateOrder) read(s string) (string, error) {
	if isSlashDate(s) && (o == orderUnknown || o == orderConflicting) {
		return "", errAmbiguousDate
	}
	for _, l := range dateLayouts {
		if len(s) < len(l.layout) || (l.order != orderUnknown && l.order != o) {
			continue
		}
		part, rest := s[:len(l.layout)], s[len(l.layout):]
		t, err := time.Parse(l.layout, part)
		if err != nil || !strings.EqualFold(t.Format(l.layout), part) || !isTimeOfDay(rest) {
			continue
		}
		return t.Format(delivery.DateLayout), nil
	}
	return "", fmt.Errorf("date %q is not in a date format the Flex Query offers (%s)", truncate(s), dateFormatsHelp)
}

// isTimeOfDay reports whether rest, what follows a date, is empty or a time
// in one of the Flex Query's formats after one of its separators or none.
func isTimeOfDay(rest string) bool {
	if rest == "" {
		return true
	}
	for _, sep := range dateTimeSeparators {
		t, ok := strings.CutPrefix(rest, sep)
		if !ok {
			continue
		}
		for _, layout := range timeLayouts {
			if len(t) == len(layout) {
				if _, err := time.Parse(layout, t); err == nil {
					return true
				}
			}
		}
	}
	return false
}
