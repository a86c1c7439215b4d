package cli

import (
	"github.com/arkadiuss/openfief/api/v1alpha1"
	"github.com/arkadiuss/openfief/internal/apiconv"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// The CLI decides nothing itself: it converts with internal/apiconv, as the
// operator does, and asks the domain.

// grantFromAPI converts a PluginGrant into the domain's Grant; nil stays nil
// (no grant approves nothing).
func grantFromAPI(g *v1alpha1.PluginGrant) *plugins.Grant {
	if g == nil {
		return nil
	}
	out := apiconv.GrantFromAPI(g)
	return &out
}
