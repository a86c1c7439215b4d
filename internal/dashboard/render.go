package dashboard

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
)

// pages are the templates of the two pages and of their live parts, the
// dashboard's one renderer (OF-21): the first page is rendered whole, and
// each event of the stream carries the page's live part rendered again by
// the same template, which the script only puts in place. html/template
// escapes every value for its context, so a vendor's text stays text.
var pages = template.Must(template.New("").ParseFS(assets, "assets/*.html"))

// view is what a page shows, the table or a plugin's page, with the names
// of its templates.
type view interface {
	// page names the template of the whole page.
	page() string
	// live names the template of the part the event stream redraws: the
	// element marked data-live in the page holds exactly what it renders.
	live() string
}

func (Table) page() string  { return "table.html" }
func (Table) live() string  { return "plugins" }
func (Detail) page() string { return "plugin.html" }
func (Detail) live() string { return "detail" }

// update is one event of the stream: the page's live part as HTML.
type update struct {
	HTML string `json:"html"`
}

// render writes a whole page; a template error is a server error, never a
// half page.
func render(w http.ResponseWriter, status int, v view) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, v.page(), v); err != nil {
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// liveUpdate renders v's live part as the data of one event: JSON, so the
// markup's line breaks stay inside one data line.
func liveUpdate(v view) ([]byte, error) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, v.live(), v); err != nil {
		return nil, err
	}
	return json.Marshal(update{HTML: b.String()})
}
