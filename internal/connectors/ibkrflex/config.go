package ibkrflex

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/arkadiuss/openfief/internal/connectors"
	"github.com/arkadiuss/openfief/sdk/go/delivery"
)

// DefaultBaseURL is IBKR's Flex Web Service host, the only host in
// ibkr-flex's manifest egress.
const DefaultBaseURL = "https://ndcdyn.interactivebrokers.com"

// DefaultCredentialsDir is where the manifest mounts the
// ibkr-flex-credentials Secret, with the files token and query-id.
const DefaultCredentialsDir = "/etc/openfief/ibkr-flex"

// Config is an ibkr-flex instance's config, read from OPENFIEF_CONFIG with
// openfief.LoadConfig (D-11). plugins/ibkr-flex/manifest.json carries its
// JSON Schema; Validate checks the same rules.
type Config struct {
	// BaseURL is where the Flex Web Service is reached, https://host[:port];
	// DefaultBaseURL when empty. Only tests set it.
	BaseURL string `json:"baseURL,omitempty"`
	// Accounts maps each IBKR account ID (such as "U1234567") to the
	// OpenFief accounts its rows are posted to. Rows of other accounts are
	// ingest problems.
	Accounts map[string]Account `json:"accounts"`
	// Categories are the OpenFief accounts that balance income, expenses
	// and transfers. A row that needs one left empty is an ingest problem.
	Categories Categories `json:"categories,omitempty"`
}

// Account is where one IBKR account's rows are posted.
type Account struct {
	// Cash maps an ISO 4217 currency to the OpenFief account holding the
	// IBKR account's cash in it.
	Cash map[string]string `json:"cash"`
	// Securities is the OpenFief account holding its positions.
	Securities string `json:"securities,omitempty"`
}

// Categories are the OpenFief accounts on the other side of cash movements.
type Categories struct {
	Dividends      string `json:"dividends,omitempty"`
	WithholdingTax string `json:"withholdingTax,omitempty"`
	Interest       string `json:"interest,omitempty"`
	Fees           string `json:"fees,omitempty"`
	Commissions    string `json:"commissions,omitempty"`
	Transfers      string `json:"transfers,omitempty"`
	FXConversion   string `json:"fxConversion,omitempty"`
}

// ibkrAccountID is the shape of an IBKR account ID accepted as a key.
var ibkrAccountID = regexp.MustCompile(`^[A-Za-z0-9]{1,32}$`)

// maxAccountIDLen bounds an OpenFief account ID in the config.
const maxAccountIDLen = 128

// Validate returns every rule the config breaks, joined, each naming its
// field.
func (c Config) Validate() error {
	var errs []error
	if c.BaseURL != "" {
		if _, err := connectors.ParseBaseURL(c.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("baseURL: %w", err))
		}
	}
	if len(c.Accounts) == 0 {
		errs = append(errs, errors.New("accounts: at least one IBKR account is required"))
	}
	check := func(field, id string) {
		if id == "" || len(id) > maxAccountIDLen {
			errs = append(errs, fmt.Errorf("%s: an account ID of 1 to %d bytes is required", field, maxAccountIDLen))
		}
	}
	for _, ib := range slices.Sorted(maps.Keys(c.Accounts)) {
		a := c.Accounts[ib]
		f := "accounts." + ib
		if !ibkrAccountID.MatchString(ib) {
			errs = append(errs, fmt.Errorf("accounts: %q is not an IBKR account ID", ib))
			continue
		}
		if len(a.Cash) == 0 {
			errs = append(errs, fmt.Errorf("%s.cash: at least one currency is required", f))
		}
		for _, cur := range slices.Sorted(maps.Keys(a.Cash)) {
			if !delivery.IsCurrency(cur) {
				errs = append(errs, fmt.Errorf("%s.cash: %q is not an ISO 4217 code", f, cur))
				continue
			}
			check(f+".cash."+cur, a.Cash[cur])
		}
		if a.Securities != "" {
			check(f+".securities", a.Securities)
		}
	}
	cats := c.Categories.fields()
	for _, name := range slices.Sorted(maps.Keys(cats)) {
		if id := cats[name]; id != "" {
			check("categories."+name, id)
		}
	}
	return errors.Join(errs...)
}

// fields maps the categories' JSON names to their account IDs.
func (c Categories) fields() map[string]string {
	return map[string]string{
		"dividends": c.Dividends, "withholdingTax": c.WithholdingTax, "interest": c.Interest,
		"fees": c.Fees, "commissions": c.Commissions, "transfers": c.Transfers, "fxConversion": c.FXConversion,
	}
}
