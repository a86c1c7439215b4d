package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/arkadiuss/openfief/internal/display"
	"io"
	"net/http"
	"strings"
)

// ApprovalRequest is what the owner confirmed on a plugin's page: approve
// everything the plugin name waits for, as long as the Plugin and its grant
// are still at the resource versions the page showed (GrantVersion is ""
// when there was no grant).
type ApprovalRequest struct {
	Name          string
	PluginVersion string
	GrantVersion  string
}

// ErrChanged is returned by an Approve function when the Plugin or its
// grant changed after the page showed them: the owner must look again
// before approving.
var ErrChanged = errors.New("the plugin or its grant changed since the page showed it; look at the page again before approving")

// ApproveFunc approves what a plugin waits for, with the CLI's code (the
// domain's plugins.Approve and the CLI's grant write), and says what it
// wrote ("plugingrant/fx created").
type ApproveFunc func(ctx context.Context, req ApprovalRequest) (string, error)

// maxApprovalBody bounds the body of an approval request.
const maxApprovalBody = 1 << 10

// approvalBody is the JSON the page posts.
type approvalBody struct {
	Plugin string `json:"plugin"`
	Grant  string `json:"grant"`
}

// approvalAnswer is the JSON the page gets back.
type approvalAnswer struct {
	Message string `json:"message"`
}

// serveApprove approves everything pending for the plugin name, after the
// owner confirmed it on its page. The access guard lets a POST through only
// from this page's own origin with a JSON body.
func (s *Server) serveApprove(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.opts.Approve == nil {
		http.NotFound(w, r)
		return
	}
	var body approvalBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxApprovalBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Plugin == "" {
		answer(w, http.StatusBadRequest, "a JSON body {\"plugin\": resourceVersion, \"grant\": resourceVersion} is required")
		return
	}
	msg, err := s.opts.Approve(r.Context(), ApprovalRequest{Name: name, PluginVersion: body.Plugin, GrantVersion: body.Grant})
	switch {
	case errors.Is(err, ErrChanged):
		answer(w, http.StatusConflict, err.Error())
	case err != nil:
		answer(w, http.StatusUnprocessableEntity, "not approved: "+err.Error())
	default:
		answer(w, http.StatusOK, msg)
	}
}

func answer(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The message can quote the grant's or the manifest's text: escaped
	// like everything else the page shows (OF-17).
	_ = json.NewEncoder(w).Encode(approvalAnswer{Message: display.Message(strings.TrimSpace(msg))})
}
