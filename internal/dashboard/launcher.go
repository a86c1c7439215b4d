package dashboard

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
)

// Launcher writes a page that sends the browser on to the dashboard's URL
// into dir and returns its path, for the command to open instead of the
// URL itself: a browser started with the URL as an argument shows the token
// to every local user in its command line (/proc/PID/cmdline), a file only
// the owner can read does not (Jupyter opens its notebooks the same way).
// dir should be a new directory only the owner can read (os.MkdirTemp);
// the file is written 0600.
func (s *Server) Launcher(dir string) (string, error) {
	u := html.EscapeString(s.URL())
	page := fmt.Sprintf(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s"><title>OpenFief dashboard</title></head>
<body><p><a href="%s">Open the OpenFief dashboard</a></p></body>
</html>
`, u, u)
	path := filepath.Join(dir, "openfief-dashboard.html")
	if err := os.WriteFile(path, []byte(page), 0o600); err != nil {
		return "", fmt.Errorf("dashboard launcher: %w", err)
	}
	return path, nil
}
