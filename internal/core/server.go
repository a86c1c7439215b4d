package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/arkadiuss/openfief/internal/core/auth"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// The owner API's paths, reached through the API server's service proxy
// (docs/core.md).
const (
	// PathStatus answers the status of every instance the core knows.
	PathStatus = "/v1/status"
	// PathPluginPrefix starts the per-instance paths:
	// /v1/plugins/<name>/status and /v1/plugins/<name>/import.
	PathPluginPrefix = "/v1/plugins/"
	// PathWhoAmI is the plugin API's one path: it answers the instance the
	// token belongs to (D-27).
	PathWhoAmI = "/plugin/v1/whoami"
	// HeaderFileName carries an imported file's name (a hint only).
	HeaderFileName = "X-OpenFief-File-Name"
	// MaxImportBytes bounds an uploaded file (OF-10).
	MaxImportBytes = 32 << 20
)

// InstanceStatus is one instance's sync state as the owner API answers it.
type InstanceStatus struct {
	Plugin    string     `json:"plugin"`
	Scheduled bool       `json:"scheduled"`
	LastSync  *time.Time `json:"lastSync,omitempty"`
	LastOK    bool       `json:"lastOK"`
	LastError string     `json:"lastError,omitempty"`
	NextSync  *time.Time `json:"nextSync,omitempty"`
	Watermark string     `json:"watermark,omitempty"`
	// RowsTotal is every row stored for the instance; Rows by table.
	RowsTotal int       `json:"rowsTotal"`
	Rows      RowCounts `json:"rows"`
}

// RowCounts are the rows stored for an instance, by table.
type RowCounts struct {
	Batches       int `json:"batches"`
	Transactions  int `json:"transactions"`
	Postings      int `json:"postings"`
	Balances      int `json:"balances"`
	Prices        int `json:"prices"`
	FxRates       int `json:"fxRates"`
	IndexReadings int `json:"indexReadings"`
	Problems      int `json:"problems"`
}

// ImportResponse is what an import or preview answers.
type ImportResponse struct {
	Plugin        string `json:"plugin"`
	Preview       bool   `json:"preview"`
	Transactions  int    `json:"transactions"`
	Postings      int    `json:"postings"`
	Balances      int    `json:"balances"`
	Prices        int    `json:"prices"`
	FxRates       int    `json:"fxRates"`
	IndexReadings int    `json:"indexReadings"`
	Problems      int    `json:"problems"`
	Duplicate     bool   `json:"duplicate"`
}

// errorResponse is every error answer's body.
type errorResponse struct {
	Error string `json:"error"`
}

// ownerHandler serves the owner API: status and file imports.
func (c *Core) ownerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET "+PathStatus, c.serveStatusAll)
	mux.HandleFunc("GET "+PathPluginPrefix+"{name}/status", c.serveStatus)
	mux.HandleFunc("POST "+PathPluginPrefix+"{name}/import", c.serveImport)
	return mux
}

// pluginHandler serves the plugin API behind RequirePlugin (D-27).
func (c *Core) pluginHandler(v *auth.Verifier, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathWhoAmI, func(w http.ResponseWriter, r *http.Request) {
		instance, _ := auth.Instance(r.Context())
		writeJSON(w, http.StatusOK, map[string]string{"plugin": instance})
	})
	inner := auth.RequirePlugin(v, log, mux)
	outer := http.NewServeMux()
	outer.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	outer.Handle("/", inner)
	return outer
}

func (c *Core) serveStatusAll(w http.ResponseWriter, r *http.Request) {
	names, err := c.known(r)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	out := make([]InstanceStatus, 0, len(names))
	for _, n := range names {
		st, err := c.status(r, n)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		out = append(out, st)
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Core) serveStatus(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := plugins.ValidateName(name); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	st, err := c.status(r, name)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (c *Core) serveImport(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := plugins.ValidateName(name); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	preview := r.URL.Query().Get("mode") == "preview"
	body := http.MaxBytesReader(w, r.Body, MaxImportBytes)
	res, err := c.sched.ImportFile(r.Context(), name, r.Header.Get(HeaderFileName), mediaType(r.Header.Get("Content-Type")), preview, body)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("the file is larger than %d bytes", MaxImportBytes))
		case errors.Is(err, ErrNotConnector):
			writeError(w, http.StatusNotFound, err)
		case errors.Is(err, ErrOutsideTiers), errors.Is(err, ErrBatchMismatch):
			writeError(w, http.StatusForbidden, err)
		case retryable(err):
			writeError(w, http.StatusServiceUnavailable, err)
		default:
			writeError(w, http.StatusUnprocessableEntity, err)
		}
		return
	}
	writeJSON(w, http.StatusOK, ImportResponse{
		Plugin: name, Preview: preview, Transactions: res.Transactions, Postings: res.Postings, Balances: res.Balances,
		Prices: res.Prices, FxRates: res.FxRates, IndexReadings: res.IndexReadings, Problems: res.Problems,
		Duplicate: res.Duplicate,
	})
}

// mediaType keeps a Content-Type's media type when it is a plain
// type/subtype, for the FileHeader's hint.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	if len(mt) > 127 || strings.Count(mt, "/") != 1 || strings.ContainsAny(mt, " \t\r\n\"") {
		return ""
	}
	return mt
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone if this fails
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorResponse{Error: err.Error()})
}
