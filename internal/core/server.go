package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/arkadiuss/openfief/internal/core/auth"
	"github.com/arkadiuss/openfief/internal/core/ownerapi"
	"github.com/arkadiuss/openfief/internal/core/store"
	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// PathWhoAmI is the plugin API's one path: it answers the instance the
// token belongs to (D-27).
const PathWhoAmI = "/plugin/v1/whoami"

// ownerHandler serves the owner API, status and file imports, behind
// RequireOwner (OF-18); only /healthz, which the kubelet probes, asks for
// no credential.
func (c *Core) ownerHandler(v *auth.OwnerVerifier, log *slog.Logger) http.Handler {
	outer := http.NewServeMux()
	outer.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	outer.Handle("/", auth.RequireOwner(v, log, c.ownerRoutes()))
	return outer
}

// ownerRoutes are the owner API's paths, with no authentication of their
// own: ownerHandler puts RequireOwner in front of them.
func (c *Core) ownerRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ownerapi.PathStatus, c.serveStatusAll)
	mux.HandleFunc("GET "+ownerapi.PathPluginPrefix+"{name}/status", c.serveStatus)
	mux.HandleFunc("POST "+ownerapi.PathPluginPrefix+"{name}/import", c.serveImport)
	mux.HandleFunc("POST "+ownerapi.PathPluginPrefix+"{name}/purge", c.servePurge)
	mux.HandleFunc("GET "+ownerapi.PathBackup, c.serveBackup)
	mux.HandleFunc("POST "+ownerapi.PathRestore, c.serveRestore)
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
	out := make([]ownerapi.InstanceStatus, 0, len(names))
	for _, n := range names {
		st, err := c.status(r, n)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		out = append(out, st)
	}
	removed, err := c.removedStatuses(r)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, append(out, removed...))
}

func (c *Core) serveStatus(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !store.ValidKey(name) {
		writeError(w, http.StatusBadRequest, errInstanceKey)
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
	if err := c.paused(); err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if c.forwardImport(w, r, name) {
		return
	}
	preview := r.URL.Query().Get("mode") == "preview"
	body := http.MaxBytesReader(w, r.Body, ownerapi.MaxImportBytes)
	res, err := c.sched.ImportFile(r.Context(), name, r.Header.Get(ownerapi.HeaderFileName), mediaType(r.Header.Get("Content-Type")), preview, body)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("the file is larger than %d bytes", ownerapi.MaxImportBytes))
		case errors.Is(err, ErrNotConnector) && c.servedElsewhere(name):
			// The lease moved while the import began.
			writeError(w, http.StatusServiceUnavailable, errServedElsewhere)
		case errors.Is(err, ErrNotConnector):
			writeError(w, http.StatusNotFound, err)
		case errors.Is(err, ErrOutsideTiers), errors.Is(err, ErrBatchMismatch):
			writeError(w, http.StatusForbidden, err)
		case errors.Is(err, ErrAnswerTooLarge), errors.Is(err, ErrRedirectRefused), errors.Is(err, ErrCompressedAnswer):
			// The plugin answered what the core never takes.
			writeError(w, http.StatusBadGateway, err)
		case retryable(err):
			writeError(w, http.StatusServiceUnavailable, err)
		default:
			writeError(w, http.StatusUnprocessableEntity, err)
		}
		return
	}
	writeJSON(w, http.StatusOK, ownerapi.ImportResponse{
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
	// The error can quote a plugin's words (an ImportFile refusal): the
	// owner API answers it escaped and bounded (OF-17).
	writeJSON(w, status, ownerapi.ErrorResponse{Error: display.Message(err.Error())})
}

// errInstanceKey answers a path whose instance key store.ValidKey refuses.
var errInstanceKey = fmt.Errorf("instance: %w", store.ErrKey)

// servePurge deletes a removed instance's data, or with ?mode=preview
// counts what a purge would delete. A live instance is refused (409): its
// Plugin must be uninstalled first.
func (c *Core) servePurge(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("name")
	if !store.ValidKey(key) {
		writeError(w, http.StatusBadRequest, errInstanceKey)
		return
	}
	if err := c.paused(); err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	preview := r.URL.Query().Get("mode") == "preview"
	n, err := c.store.Purge(r.Context(), key, preview)
	var ve *store.ValidationError
	switch {
	case errors.Is(err, store.ErrLive):
		writeError(w, http.StatusConflict, fmt.Errorf("%s: %w", key, err))
		return
	case errors.Is(err, store.ErrUnknownInstance):
		writeError(w, http.StatusNotFound, err)
		return
	case errors.As(err, &ve):
		writeError(w, http.StatusBadRequest, err)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if !preview {
		c.log.Info("purged a removed instance's data", "instance", key, "rows", n.Total())
	}
	rc := n.Rows
	writeJSON(w, http.StatusOK, ownerapi.PurgeResponse{
		Instance: key, Preview: preview, ViewPlaces: n.ViewPlaces, RowsTotal: n.Total(),
		Rows: ownerapi.RowCounts{
			Batches: rc.Batches, Transactions: rc.Transactions, Postings: rc.Postings, Balances: rc.Balances,
			Prices: rc.Prices, FxRates: rc.FxRates, IndexReadings: rc.IndexReadings, Problems: rc.Problems,
		},
	})
}
