package devstack

import (
	"io"
	"log"
	"log/slog"

	"github.com/go-logr/logr"
)

// logrLogger sends the operator's logs to w as text (nowhere when w is nil).
func logrLogger(w io.Writer) logr.Logger {
	if w == nil {
		return logr.Discard()
	}
	return logr.FromSlogHandler(slog.NewTextHandler(w, nil))
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
