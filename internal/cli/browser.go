package cli

import (
	"os"
	"os/exec"

	"github.com/arkadiuss/openfief/internal/dashboard"
)

// openBrowser opens the dashboard in the owner's browser ($BROWSER, one
// command, else xdg-open) without waiting for it. The browser gets the path
// of a launcher page in a new directory only the owner can read, never the
// URL: a command line shows the token to every local user. The returned
// cleanup removes the directory; it is safe to call on error too.
func openBrowser(srv *dashboard.Server) (cleanup func(), err error) {
	cleanup = func() {}
	dir, err := os.MkdirTemp("", "openfief-dashboard-")
	if err != nil {
		return cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	page, err := srv.Launcher(dir)
	if err != nil {
		return cleanup, err
	}
	name := os.Getenv("BROWSER")
	if name == "" {
		name = "xdg-open"
	}
	c := exec.Command(name, "file://"+page)
	if err := c.Start(); err != nil {
		return cleanup, err
	}
	go func() { _ = c.Wait() }()
	return cleanup, nil
}
