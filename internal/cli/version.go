package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/arkadiuss/openfief/internal/display"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

// ClientVersion is what the openfief binary knows of itself: the release
// it was built by (linked in with -X, catalog.VersionSymbol) or, for a
// development build, the module version Go recorded, and the commit: the
// release's (catalog.CommitSymbol), else Go's build information (`go
// version -m`).
type ClientVersion struct {
	// Version is the release's version, or Go's module version of the
	// build ("(devel)" when it recorded none).
	Version string `json:"version"`
	// Release is true when a release built the binary.
	Release bool `json:"release"`
	// Commit is the source's commit, "" when the build recorded none.
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time, RFC 3339.
	CommitTime string `json:"commitTime,omitempty"`
	// Modified is true when the build's work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built it.
	GoVersion string `json:"goVersion"`
	// Platform is the binary's GOOS/GOARCH.
	Platform string `json:"platform"`
}

// PlatformVersion is the installed platform's version as the cluster shows
// it: the highest version label of the platform's objects (the
// openfief-release ConfigMap among them), and each Deployment's.
type PlatformVersion struct {
	// Installed is false when the cluster holds no platform.
	Installed bool `json:"installed"`
	// Version is the installed version, "" when no object carries one.
	Version string `json:"version,omitempty"`
	// Components are the platform's Deployments, by name.
	Components []ComponentVersion `json:"components,omitempty"`
}

// ComponentVersion is one platform Deployment's version label and image.
type ComponentVersion struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Image   string `json:"image,omitempty"`
}

// versionReport is `openfief version -o json`'s document, shaped like
// `kubectl version -o json`'s.
type versionReport struct {
	Client   ClientVersion    `json:"clientVersion"`
	Platform *PlatformVersion `json:"platformVersion,omitempty"`
}

// Client returns this binary's version.
func Client() ClientVersion {
	v := ClientVersion{Version: catalog.Version(), Commit: catalog.Commit(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	v.Release = v.Version != ""
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if v.Version == "" {
			v.Version = "(devel)"
		}
		return v
	}
	if v.Version == "" {
		v.Version = bi.Main.Version
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = cmp.Or(v.Commit, s.Value)
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the client's version on one line, as --version prints it.
func (v ClientVersion) String() string {
	s := v.Version
	if v.Commit != "" {
		s += ", commit " + v.Commit
		if v.Modified {
			s += " (modified)"
		}
	}
	return s + ", " + v.GoVersion + " " + v.Platform
}

// versionOptions are `openfief version`'s flags.
type versionOptions struct {
	env        *Env
	output     string
	clientOnly bool
}

// newVersionCommand builds `openfief version`.
func newVersionCommand(env *Env) *cobra.Command {
	o := &versionOptions{env: env}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the CLI's version and commit, and the installed platform's version",
		Long: `Show the CLI's version and commit and, unless --client, the version of the
platform installed in the kubeconfig's cluster, as 'kubectl version' and
'flux version' do.

The CLI's version is its release's (linked in when a release builds it) or, for
a development build, what Go recorded of the build; its commit is Go's build
information ('go version -m'). The platform's version is the highest version
label of its objects (the openfief-release ConfigMap among them), with each
Deployment's version label and image, as 'openfief platform status' reads
them; a cluster without the platform says "not installed".

A cluster that cannot be reached prints the CLI's part, then the error, and
exits 1. 'openfief --version' prints the CLI's part alone, on one line.`,
		Example: `  openfief version
  openfief version --client
  openfief version -o json`,
		Args: exactArgs(0),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: lines)")
	cmd.Flags().BoolVar(&o.clientOnly, "client", false, "show the CLI's version only; do not reach the cluster")
	return cmd
}

// Complete has nothing to fill: version takes no argument.
func (o *versionOptions) Complete([]string) error { return nil }

// Validate refuses an -o other than json or yaml.
func (o *versionOptions) Validate() error { return checkOutput(o.output) }

// Run prints the client's version and, unless --client, the platform's;
// a cluster error comes after the client's part.
func (o *versionOptions) Run(ctx context.Context) error {
	env := o.env
	rep := versionReport{Client: Client()}
	var perr error
	if !o.clientOnly {
		pv, err := env.platformVersion(ctx)
		if err != nil {
			perr = err
		} else {
			rep.Platform = &pv
		}
	}
	if err := printVersion(env.Out, o.output, rep); err != nil {
		return err
	}
	return perr
}

// platformVersion reads the installed platform's version.
func (e *Env) platformVersion(ctx context.Context) (PlatformVersion, error) {
	c, err := e.Client()
	if err != nil {
		return PlatformVersion{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, platformStatusTimeout)
	defer cancel()
	st, err := platform.ReadStatus(ctx, c)
	if errors.Is(err, platform.ErrNotInstalled) {
		return PlatformVersion{}, nil
	}
	if err != nil {
		return PlatformVersion{}, exitf(ExitFailure, "reading the platform's version: %w", err)
	}
	pv := PlatformVersion{Installed: true, Version: display.Text(st.Version)}
	for _, comp := range st.Components {
		pv.Components = append(pv.Components, ComponentVersion{Name: display.Text(comp.Name), Version: display.Text(comp.Version), Image: display.Text(comp.Image)})
	}
	return pv, nil
}

// printVersion writes rep as lines, or as a document with -o.
func printVersion(w io.Writer, output string, rep versionReport) error {
	switch output {
	case outputJSON:
		b, err := json.MarshalIndent(rep, "", "    ")
		if err != nil {
			return exitf(ExitFailure, "encoding json: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case outputYAML:
		b, err := yaml.Marshal(rep)
		if err != nil {
			return exitf(ExitFailure, "encoding yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	c := rep.Client
	kind := "development build"
	if c.Release {
		kind = "release"
	}
	fmt.Fprintf(w, "Client Version:    %s (%s)\n", c.Version, kind)
	commit := "unknown (the build recorded none)"
	if c.Commit != "" {
		commit = c.Commit
		if c.CommitTime != "" {
			commit += " at " + c.CommitTime
		}
		if c.Modified {
			commit += ", with uncommitted changes"
		}
	}
	fmt.Fprintf(w, "Client Commit:     %s\n", commit)
	fmt.Fprintf(w, "Go Version:        %s %s\n", c.GoVersion, c.Platform)
	p := rep.Platform
	switch {
	case p == nil:
	case !p.Installed:
		fmt.Fprintln(w, "Platform Version:  not installed")
	default:
		fmt.Fprintf(w, "Platform Version:  %s\n", orDash(p.Version))
		for _, comp := range p.Components {
			fmt.Fprintf(w, "  %s: %s\n", comp.Name, orDash(comp.Version))
		}
	}
	return nil
}
