package ibkrflex

// assetKind is how a trade of an asset category is booked.
type assetKind int

const (
	// assetSecurity: units bought or sold for cash on the trade; the
	// securities account holds them at cost.
	assetSecurity assetKind = iota + 1
	// assetFX: a currency conversion (category CASH, symbol BASE.QUOTE).
	assetFX
	// assetUnmapped: a category whose cash does not move with the trade's
	// price, which ibkr-flex leaves out with a problem naming it.
	assetUnmapped
)

// assetCategory is what ibkr-flex knows of one of IBKR's asset categories
// (the Flex attribute assetCategory, "Asset Class" in the portal).
type assetCategory struct {
	kind assetKind
	// unitMultiplier: a row without a multiplier attribute trades one unit
	// per quantity, so proceeds can be computed as quantity × price.
	unitMultiplier bool
	// priceInPercent: the price is a percentage of face value, so proceeds
	// are never computed from it.
	priceInPercent bool
	// why says, for an unmapped category, why it is left out.
	why string
}

// assetCategories are the categories IBKR's Flex statements use (OF-20). ETFs are
// STK with subCategory ETF. Every other category is reported as not
// mapped.
var assetCategories = map[string]assetCategory{
	"STK":    {kind: assetSecurity, unitMultiplier: true},
	"FUND":   {kind: assetSecurity, unitMultiplier: true},
	"CMDTY":  {kind: assetSecurity, unitMultiplier: true},
	"CRYPTO": {kind: assetSecurity, unitMultiplier: true},
	"OPT":    {kind: assetSecurity},
	"WAR":    {kind: assetSecurity},
	"IOPT":   {kind: assetSecurity},
	"BOND":   {kind: assetSecurity, priceInPercent: true},
	"BILL":   {kind: assetSecurity, priceInPercent: true},
	"CASH":   {kind: assetFX, unitMultiplier: true},
	"FUT":    {kind: assetUnmapped, why: "futures are settled every day as variation margin, not for their price at the trade"},
	"FOP":    {kind: assetUnmapped, why: "options on futures are not mapped yet"},
	"CFD":    {kind: assetUnmapped, why: "a CFD's cash moves with its daily mark, not with its price at the trade"},
	"FXCFD":  {kind: assetUnmapped, why: "a CFD's cash moves with its daily mark, not with its price at the trade"},
}
