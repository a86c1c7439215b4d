package core

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkadiuss/openfief/internal/core/store"
)

// The core's metrics read from the store at each scrape rather than kept in
// step: the rows stored, each running view's lag and the record's size.

// metricsStore is what the scrape reads of the store besides Store;
// *store.Store is it.
type metricsStore interface {
	Size(ctx context.Context) (int64, error)
	ViewLag(ctx context.Context, view string, kinds []store.EntryKind) (int64, error)
}

// watchStore registers the series read from the store at each scrape: the
// rows stored per live instance and kind, each running view's lag (under
// its tiers as they stand) and the record's size.
func (m *Metrics) watchStore(st Store, views *Views) error {
	if m == nil {
		return nil
	}
	return m.reg.Register(&storeCollector{st: st, views: views})
}

// storeCollector reads the store's series at each scrape.
type storeCollector struct {
	st    Store
	views *Views
}

var (
	rowsDesc = prometheus.NewDesc("openfief_core_stored_rows",
		"Rows the store holds of each live instance, by kind.", []string{"plugin", "kind"}, nil)
	lagDesc = prometheus.NewDesc("openfief_core_view_lag_entries",
		"Entries of the kinds a view may be sent that it has not kept yet: what its next export would send.", []string{"plugin"}, nil)
	sizeDesc = prometheus.NewDesc("openfief_core_store_size_bytes",
		"Bytes the record takes: the SQLite file and its write-ahead log, or the PostgreSQL database's size.", nil, nil)
)

// Row kinds (the kind label of openfief_core_stored_rows), as
// `openfief plugin status` names them.
const (
	rowBatches       = "batches"
	rowTransactions  = "transactions"
	rowPostings      = "postings"
	rowBalances      = "balances"
	rowPrices        = "prices"
	rowFxRates       = "fx_rates"
	rowIndexReadings = "index_readings"
	rowProblems      = "problems"
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rowsDesc
	ch <- lagDesc
	ch <- sizeDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	names, err := c.st.Instances(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(rowsDesc, err)
	}
	for _, name := range names {
		rec, err := c.st.Status(ctx, name)
		if errors.Is(err, store.ErrUnknownInstance) {
			continue
		}
		if err != nil {
			ch <- prometheus.NewInvalidMetric(rowsDesc, err)
			break
		}
		r := rec.Rows
		for kind, n := range map[string]int{
			rowBatches: r.Batches, rowTransactions: r.Transactions, rowPostings: r.Postings, rowBalances: r.Balances,
			rowPrices: r.Prices, rowFxRates: r.FxRates, rowIndexReadings: r.IndexReadings, rowProblems: r.Problems,
		} {
			ch <- prometheus.MustNewConstMetric(rowsDesc, prometheus.GaugeValue, float64(n), name, kind)
		}
	}
	ms, ok := c.st.(metricsStore)
	if !ok {
		return
	}
	for _, view := range c.views.Instances() {
		tiers, err := c.views.Tiers(ctx, view)
		if err != nil {
			continue // stopped meanwhile
		}
		n, err := ms.ViewLag(ctx, view, ViewKinds(tiers))
		if err != nil {
			ch <- prometheus.NewInvalidMetric(lagDesc, err)
			break
		}
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(n), view)
	}
	size, err := ms.Size(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sizeDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(sizeDesc, prometheus.GaugeValue, float64(size))
}
