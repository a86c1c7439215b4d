// Package deliveryrules holds what the core admits of a plugin's delivery
// before storing it (D-49): the SDK's delivery rules (delivery.Validate) and
// the store's own bounds, text and balance rules. It links no database, so
// the conformance harness (internal/harness) judges an answer by the very
// rules the store applies; internal/core/store re-exports every name.
package deliveryrules

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/arkadiuss/openfief/sdk/go/delivery"
	connectorv1 "github.com/arkadiuss/openfief/sdk/go/gen/openfief/connector/v1"
)

// Kind says how a delivery reached the core (D-49).
type Kind int

const (
	// KindSync is a delivery a Sync answered; its watermark is saved with it.
	KindSync Kind = iota + 1
	// KindFile is a delivery an ImportFile answered; its watermark is ignored.
	KindFile
)

// String names the kind as the batches table records it.
func (k Kind) String() string {
	switch k {
	case KindSync:
		return "sync"
	case KindFile:
		return "file"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Bounds on one delivery. A delivery beyond any of them is refused whole,
// before anything is read into the database.
const (
	// MaxBatchRows bounds the entries of one delivery: transactions, balance
	// assertions, prices, FX rates, index readings and problems together.
	MaxBatchRows = 100_000
	// MaxPostings bounds the postings of one transaction.
	MaxPostings = 1_000
	// MaxText bounds every string of a delivery, in bytes, but the watermark.
	MaxText = 4_096
	// MaxWatermark bounds the watermark, in bytes.
	MaxWatermark = 65_536
	// MaxInstance bounds an instance name (a Kubernetes object name).
	MaxInstance = 253
)

// The store's own rules, beside the SDK's (delivery.ErrRequired and the
// rest); each FieldError of a ValidationError wraps one rule.
var (
	// ErrTooLarge means the delivery, or a transaction's postings, exceed a bound.
	ErrTooLarge = errors.New("too large")
	// ErrTooLong means a string exceeds MaxText (or MaxWatermark).
	ErrTooLong = errors.New("too long")
	// ErrNotText means a string holds a NUL byte or is not UTF-8, which
	// PostgreSQL cannot store as text.
	ErrNotText = errors.New("holds NUL or is not UTF-8")
	// ErrUnbalanced means a transaction's postings do not add up to zero per
	// currency and the delivery carries no unbalanced_transaction problem for
	// it (the SDK's Builder reports one for every such transaction).
	ErrUnbalanced = errors.New("postings do not balance and no unbalanced_transaction problem reports it")
	// ErrInstanceName means an instance name is not a Kubernetes object name.
	ErrInstanceName = errors.New("not an instance name: lower-case letters, digits, '-' and '.', at most 253")
	// ErrKind means the import's Kind is neither KindSync nor KindFile.
	ErrKind = errors.New("not KindSync or KindFile")
)

// ValidationError says why a delivery was refused; nothing of it was
// stored. Each entry names the field ("transactions[2].postings[0].amount")
// and wraps the rule it breaks, so errors.Is(err, delivery.ErrNotDecimal)
// and errors.Is(err, ErrTooLarge) work.
type ValidationError struct {
	// Fields lists every problem found, in the delivery's order.
	Fields []*delivery.FieldError
}

// maxListed bounds how many fields Error spells out.
const maxListed = 10

// Error lists the first fields and their rules, then how many more there are.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("store: delivery refused: ")
	for i, f := range e.Fields {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(e.Fields)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

// Unwrap returns every field's error, for errors.Is and errors.As.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Fields))
	for i, f := range e.Fields {
		out[i] = f
	}
	return out
}

// Refuse is a ValidationError naming one field and the rule it breaks.
func Refuse(field string, err error) *ValidationError {
	return &ValidationError{Fields: []*delivery.FieldError{{Field: field, Err: err}}}
}

// ValidInstance reports whether name is a Kubernetes object name (DNS
// subdomain): the core's instances are Plugin names.
func ValidInstance(name string) bool {
	if name == "" || len(name) > MaxInstance {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' && c != '.' || i == 0 || i == len(name)-1) {
			return false
		}
	}
	return true
}

// Validate checks an import's arguments and d against the SDK's delivery
// rules (delivery.Validate) and the store's own: bounded sizes first (a
// delivery too large is refused before anything else is read), then text
// that both databases can store, then balance.
func Validate(instance string, kind Kind, d *connectorv1.Delivery) error {
	if !ValidInstance(instance) {
		return Refuse("instance", ErrInstanceName)
	}
	if kind != KindSync && kind != KindFile {
		return Refuse("kind", ErrKind)
	}
	if d == nil {
		return Refuse("delivery", delivery.ErrRequired)
	}
	if n := rowCount(d); n > MaxBatchRows {
		return Refuse("delivery", fmt.Errorf("%w: %d entries, at most %d", ErrTooLarge, n, MaxBatchRows))
	}
	var c collector
	for i, t := range d.GetTransactions() {
		if n := len(t.GetPostings()); n > MaxPostings {
			c.add(fmt.Sprintf("transactions[%d].postings", i), fmt.Errorf("%w: %d postings, at most %d", ErrTooLarge, n, MaxPostings))
		}
	}
	if len(c.fields) > 0 {
		return &ValidationError{Fields: c.fields}
	}
	if err := delivery.Validate(d); err != nil {
		var fe *delivery.FieldError
		for _, e := range unjoin(err) {
			if errors.As(e, &fe) {
				c.fields = append(c.fields, fe)
			} else {
				c.add("delivery", e)
			}
		}
	}
	checkText(&c, d)
	checkBalance(&c, d)
	if len(c.fields) > 0 {
		return &ValidationError{Fields: c.fields}
	}
	return nil
}

// rowCount is the number of entries MaxBatchRows bounds.
func rowCount(d *connectorv1.Delivery) int {
	return len(d.GetTransactions()) + len(d.GetBalanceAssertions()) + len(d.GetPrices()) +
		len(d.GetFxRates()) + len(d.GetIndexReadings()) + len(d.GetProblems())
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// collector gathers the store's own FieldErrors; a quick one only notes
// that some field failed.
type collector struct {
	fields []*delivery.FieldError
	quick  bool
	failed bool
}

func (c *collector) add(field string, err error) {
	c.failed = true
	if c.quick {
		return
	}
	c.fields = append(c.fields, &delivery.FieldError{Field: field, Err: err})
}

// text checks one string: bounded, UTF-8, no NUL.
func (c *collector) text(field, v string, limit int) {
	switch {
	case len(v) > limit:
		c.add(field, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLong, len(v), limit))
	case strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v):
		c.add(field, ErrNotText)
	}
}

func (c *collector) instrument(field string, in *connectorv1.Instrument) {
	if in == nil {
		return
	}
	c.text(field+".isin", in.GetIsin(), MaxText)
	c.text(field+".symbol", in.GetSymbol(), MaxText)
	c.text(field+".exchange", in.GetExchange(), MaxText)
	c.text(field+".currency", in.GetCurrency(), MaxText)
	c.text(field+".name", in.GetName(), MaxText)
}

// checkText bounds every string the store keeps and refuses what either
// database could not store as text. A quick pass finds whether any string
// breaks a rule; only then does a second pass name the fields.
func checkText(c *collector, d *connectorv1.Delivery) {
	var quick collector
	quick.quick = true
	allText(&quick, d)
	if !quick.failed {
		return
	}
	allText(c, d)
}

// allText checks every string of d with c.text.
func allText(c *collector, d *connectorv1.Delivery) {
	path := func(format string, args ...any) string {
		if c.quick {
			return ""
		}
		return fmt.Sprintf(format, args...)
	}
	c.text("batch_id", d.GetBatchId(), MaxText)
	c.text("institution.id", d.GetInstitution().GetId(), MaxText)
	c.text("institution.name", d.GetInstitution().GetName(), MaxText)
	c.text("watermark", d.GetWatermark(), MaxWatermark)
	for i, t := range d.GetTransactions() {
		f := path("transactions[%d]", i)
		c.text(f+".source_id", t.GetSourceId(), MaxText)
		c.text(f+".description", t.GetDescription(), MaxText)
		c.text(f+".payee", t.GetPayee(), MaxText)
		for j, p := range t.GetPostings() {
			pf := path("%s.postings[%d]", f, j)
			c.text(pf+".account_id", p.GetAccountId(), MaxText)
			c.text(pf+".memo", p.GetMemo(), MaxText)
			c.instrument(pf+".instrument", p.GetInstrument())
		}
	}
	for i, b := range d.GetBalanceAssertions() {
		f := path("balance_assertions[%d]", i)
		c.text(f+".account_id", b.GetAccountId(), MaxText)
		c.instrument(f+".instrument", b.GetInstrument())
	}
	for i, p := range d.GetProblems() {
		f := path("problems[%d]", i)
		c.text(f+".code", p.GetCode(), MaxText)
		c.text(f+".message", p.GetMessage(), MaxText)
		c.text(f+".source_id", p.GetSourceId(), MaxText)
		c.text(f+".location", p.GetLocation(), MaxText)
	}
	for i, p := range d.GetPrices() {
		c.instrument(path("prices[%d].instrument", i), p.GetInstrument())
	}
	for i, r := range d.GetFxRates() {
		c.text(path("fx_rates[%d].source_ref", i), r.GetSourceRef(), MaxText)
	}
	for i, r := range d.GetIndexReadings() {
		f := path("index_readings[%d]", i)
		c.text(f+".index_id", r.GetIndexId(), MaxText)
		c.text(f+".name", r.GetName(), MaxText)
	}
}

// checkBalance refuses a transaction whose postings do not add up to zero
// per currency unless the delivery reports it with an unbalanced_transaction
// problem, as the SDK's Builder does: the imbalance is then stored with its
// problem, as the contract says, and never silently.
func checkBalance(c *collector, d *connectorv1.Delivery) {
	reported := make(map[string]bool)
	for _, p := range d.GetProblems() {
		if p.GetCode() == delivery.ProblemUnbalanced && p.GetSourceId() != "" {
			reported[p.GetSourceId()] = true
		}
	}
	for i, t := range d.GetTransactions() {
		if off := delivery.Imbalance(t); len(off) > 0 && !reported[t.GetSourceId()] {
			c.add(fmt.Sprintf("transactions[%d].postings", i), fmt.Errorf("%w (off by %s)", ErrUnbalanced, strings.Join(off, ", ")))
		}
	}
}
