package webdavcsv

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/arkadiuss/openfief/internal/display"
)

// MaxFileBytes bounds a file the view reads or writes: 64 MiB, about half a
// million transaction rows in one month. A larger file on the server is
// refused, not read.
const MaxFileBytes = 64 << 20

// errForeign is wrapped by the errors of an existing file the view cannot
// have written: another header, a broken row, an unreadable sequence. Such
// a file is never overwritten.
var errForeign = errors.New("not a file this view writes")

// readSequences reads an existing file of kind k and returns the sequence
// numbers of its rows. The file must be strict CSV (RFC 4180 quoting, the
// same number of cells in every row) that starts with k's header exactly,
// and every row's first cell must be a sequence number. An empty file has
// none.
func readSequences(k Kind, body []byte) (map[uint64]bool, error) {
	seen := map[uint64]bool{}
	if len(body) == 0 {
		return seen, nil
	}
	header := Header(k)
	r := csv.NewReader(bytes.NewReader(body))
	r.FieldsPerRecord = len(header)
	r.ReuseRecord = true
	first, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: header: %s", errForeign, csvError(err))
	}
	if !slices.Equal(first, header) {
		return nil, fmt.Errorf("%w: its header is not the %s header (%s)", errForeign, k, display.Limit(fmt.Sprint(first), 200))
	}
	for row := 2; ; row++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return seen, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s", errForeign, csvError(err))
		}
		seq, err := strconv.ParseUint(rec[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: row %d: sequence %q is not a number", errForeign, row, display.Text(rec[0]))
		}
		seen[seq] = true
	}
}

// csvError describes a CSV error without quoting the file's content.
func csvError(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("record on line %d: %v", pe.Line, pe.Err)
	}
	if errors.Is(err, io.EOF) {
		return "the file ends before its header"
	}
	return "unreadable"
}

// appendRecords returns body with the rows of the records whose sequence it
// does not hold yet, ordered by sequence (a transaction's postings in their
// order), and how many entries that added. A body without rows gets k's
// header first. Nothing to add returns added 0, and the file is left as it
// is. The result is refused when it would be larger than limit.
func appendRecords(k Kind, body []byte, recs []record, limit int) (out []byte, added int, err error) {
	seen, err := readSequences(k, body)
	if err != nil {
		return nil, 0, err
	}
	var fresh []record
	for _, r := range recs {
		if !seen[r.sequence] {
			seen[r.sequence] = true
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return nil, 0, nil
	}
	slices.SortStableFunc(fresh, func(a, b record) int { return cmp.Compare(a.sequence, b.sequence) })
	var buf bytes.Buffer
	buf.Write(body)
	if buf.Len() > 0 && body[len(body)-1] != '\n' {
		buf.WriteByte('\n')
	}
	w := csv.NewWriter(&buf)
	if len(body) == 0 {
		_ = w.Write(Header(k))
	}
	for _, r := range fresh {
		for _, row := range r.rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = Neutralise(c)
			}
			_ = w.Write(cells)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, 0, err
	}
	if buf.Len() > limit {
		return nil, 0, fmt.Errorf("%w: with this page's rows the file would hold %d bytes, more than the %d this view reads back", errTooLarge, buf.Len(), limit)
	}
	return buf.Bytes(), len(fresh), nil
}

// errTooLarge is wrapped by the errors of a file beyond MaxFileBytes.
var errTooLarge = errors.New("file too large")
