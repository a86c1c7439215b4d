package nbpfx

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/arkadiuss/openfief/internal/connectors"
	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// DefaultBaseURL is NBP's API, the only host in nbp-fx's manifest egress.
const DefaultBaseURL = "https://api.nbp.pl"

// firstTableDate is the earliest day NBP's API has table A for.
const firstTableDate = "2002-01-02"

// Config is an nbp-fx instance's config, read from OPENFIEF_CONFIG with
// openfief.LoadConfig (D-11). plugins/nbp-fx/manifest.json carries the JSON
// Schema the operator checks it against; Validate checks the same rules, so
// a config that reaches the plugin another way is refused too.
type Config struct {
	// BaseURL is where NBP's API is reached, https://host[:port] with no path;
	// DefaultBaseURL when empty. Only tests and the e2e suite set it, to a
	// loopback fake: the egress allow-list still limits what the plugin can
	// reach, and the SDK's egress client refuses plain http.
	BaseURL string `json:"baseURL,omitempty"`
	// Currencies limits the delivered rates to these ISO 4217 codes; empty
	// delivers every currency of table A.
	Currencies []string `json:"currencies,omitempty"`
	// StartDate is the first day the first sync (empty watermark) asks for,
	// YYYY-MM-DD, not before 2002-01-02; empty means 92 days before today,
	// one NBP range.
	StartDate string `json:"startDate,omitempty"`
}

// Validate returns every rule the config breaks, joined, each naming its
// field.
func (c Config) Validate() error {
	var errs []error
	if c.BaseURL != "" {
		if _, err := connectors.ParseBaseURL(c.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("baseURL: %w", err))
		}
	}
	for i, code := range c.Currencies {
		switch {
		case !delivery.IsCurrency(code):
			errs = append(errs, fmt.Errorf("currencies[%d]: %q is not an ISO 4217 code", i, code))
		case code == "PLN":
			errs = append(errs, fmt.Errorf("currencies[%d]: PLN is the quote currency of every rate", i))
		case slices.Contains(c.Currencies[:i], code):
			errs = append(errs, fmt.Errorf("currencies[%d]: %s appears more than once", i, code))
		}
	}
	if c.StartDate != "" {
		if !delivery.IsDate(c.StartDate) {
			errs = append(errs, fmt.Errorf("startDate: %q is not a YYYY-MM-DD date", c.StartDate))
		} else if c.StartDate < firstTableDate {
			errs = append(errs, fmt.Errorf("startDate: NBP's API starts on %s", firstTableDate))
		}
	}
	return errors.Join(errs...)
}

// startDate is the first day a sync with an empty watermark asks for.
func (c Config) startDate(today time.Time) time.Time {
	if c.StartDate != "" {
		if t, err := time.Parse(delivery.DateLayout, c.StartDate); err == nil {
			return t
		}
	}
	return today.AddDate(0, 0, -(maxRangeDays - 1))
}
