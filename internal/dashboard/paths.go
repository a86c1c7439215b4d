package dashboard

// Every page lives under /TOKEN/ (see access), so pages link to each other
// and to their script, style sheet and event stream with relative paths:
// the browser keeps the token, and no page ever holds it.

// PageTitle is the table page's title.
func (Table) PageTitle() string { return "Plugins" }

// Root is the table page's way back to /TOKEN/: it is there.
func (Table) Root() string { return "./" }

// PageTitle is a plugin page's title: the plugin's name.
func (d Detail) PageTitle() string { return d.Name }

// Root is a plugin page's way back to /TOKEN/ from /TOKEN/plugins/NAME.
func (Detail) Root() string { return "../" }
