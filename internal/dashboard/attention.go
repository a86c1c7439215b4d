package dashboard

import (
	"github.com/arkadiuss/openfief/internal/attention"
	"github.com/arkadiuss/openfief/internal/display"
)

// Notice is one line of the table page's "Needs your attention" list,
// which holds what `openfief status` prints (attention.Compute): what is
// wrong, the plugin's page when it concerns a plugin, and the command to
// run next.
type Notice struct {
	// ID names the line and its copy button, so a redraw keeps the focus
	// on it: its kind and its plugin or component.
	ID      string
	Kind    string
	Plugin  string
	Message string
	Command string
}

// notices computes the list from what the watches and the core's poll
// hold now. The platform's Deployments are not watched: the dashboard
// reads only what the owner's plugins need, and `openfief status` adds
// them.
func (s snapshot) notices() []Notice {
	in := attention.Input{Now: s.now, Plugins: s.plugins, Commands: attention.Commands{Approve: s.approve, Status: s.status}}
	if s.core.configured && s.core.answered {
		if s.core.err != "" {
			in.CoreError = s.core.err
		} else {
			in.Core, in.CoreRead = s.core.statuses, true
		}
	}
	items := attention.Compute(in)
	out := make([]Notice, 0, len(items))
	for _, it := range items {
		name := it.Plugin
		if name == "" {
			name = it.Component
		}
		id := "attention-" + string(it.Kind)
		if name != "" {
			id += "-" + name
		}
		out = append(out, Notice{ID: display.Text(id), Kind: display.Text(string(it.Kind)), Plugin: it.Plugin, Message: it.Message, Command: it.Command})
	}
	return out
}
