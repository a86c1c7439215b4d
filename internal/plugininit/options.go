package plugininit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// Lang is the language of a plugin project.
type Lang string

// The languages plugin init writes.
const (
	Go         Lang = "go"
	TypeScript Lang = "ts"
)

// Kind is what the plugin acts as: the manifest's capability.
type Kind string

// The kinds plugin init writes.
const (
	Connector Kind = Kind(plugins.CapabilityConnector)
	View      Kind = Kind(plugins.CapabilityView)
)

// GoSDKModule is the Go SDK's module path.
const GoSDKModule = "github.com/arkadiuss/openfief/sdk/go"

// TSSDKPackage is the TypeScript SDK's npm package name.
const TSSDKPackage = "@openfief/sdk"

// TSSDKVersion is the version of TSSDKPackage the projects require unless
// Options.SDK names a folder; the tests keep it equal to sdk/ts's
// package.json.
const TSSDKVersion = "0.1.0"

// DevGoSDKVersion is the version a development build's projects require of
// GoSDKModule: the placeholder Go itself writes for a module that only a
// replace directive provides.
const DevGoSDKVersion = "v0.0.0-00010101000000-000000000000"

// Options say which project to write.
type Options struct {
	// Name is the plugin's name, by the Plugin resource's rule
	// (plugins.ValidateName): the go.mod module, the npm package, the image.
	Name string
	// Lang is the project's language.
	Lang Lang
	// Kind is what the plugin acts as.
	Kind Kind
	// SDK, when set, is a folder holding the SDK of Lang from an OpenFief
	// checkout (its sdk/go, or a built sdk/ts), which the project then builds
	// against (a go.mod replace, an npm "file:" dependency) instead of the
	// published SDK. Made absolute by Validate.
	SDK string
	// Version is the OpenFief release this CLI was built by ("" for a
	// development build): a Go project requires the Go SDK of that release.
	Version string
}

// releaseVersion matches a release's version, vMAJOR.MINOR.PATCH with an
// optional pre-release suffix, which is also a Go module version.
var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// OptionError is an option refused by Validate: Option names it as the
// command line does ("NAME", "--lang"), Err says the rule.
type OptionError struct {
	Option string
	Err    error
}

func (e *OptionError) Error() string { return e.Option + ": " + e.Err.Error() }

// Unwrap returns the rule's error.
func (e *OptionError) Unwrap() error { return e.Err }

// Validate checks o, reading only the SDK folder, and makes SDK absolute.
func (o *Options) Validate() error {
	if err := plugins.ValidateName(o.Name); err != nil {
		return &OptionError{"NAME", fmt.Errorf("%w (the rule of a Plugin resource's name: a lower-case DNS label starting with a letter, at most %d characters)", err, plugins.MaxNameLength)}
	}
	switch o.Lang {
	case Go, TypeScript:
	case "":
		return &OptionError{"--lang", errors.New("required: go or ts")}
	default:
		return &OptionError{"--lang", fmt.Errorf("%q is not a language plugin init writes: go or ts", o.Lang)}
	}
	switch o.Kind {
	case Connector, View:
	default:
		return &OptionError{"--kind", fmt.Errorf("%q is not a kind of plugin: connector or view", o.Kind)}
	}
	if o.Version != "" && !releaseVersion.MatchString(o.Version) {
		return fmt.Errorf("this CLI's release version %q is not vMAJOR.MINOR.PATCH", o.Version)
	}
	if o.SDK == "" {
		return nil
	}
	abs, err := filepath.Abs(o.SDK)
	if err != nil {
		return &OptionError{"--sdk", err}
	}
	if strings.ContainsAny(abs, "\"'\\\n\r\t") {
		return &OptionError{"--sdk", fmt.Errorf("%q: a folder whose path holds a quote, a backslash or a control character cannot be written into go.mod or package.json", abs)}
	}
	o.SDK = abs
	return checkSDK(o.Lang, abs)
}

// checkSDK refuses a folder that does not hold the SDK of lang.
func checkSDK(lang Lang, dir string) error {
	switch lang {
	case Go:
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil || !strings.HasPrefix(string(raw), "module "+GoSDKModule+"\n") {
			return &OptionError{"--sdk", fmt.Errorf("%s holds no go.mod of module %s: name the sdk/go folder of an OpenFief checkout", dir, GoSDKModule)}
		}
	case TypeScript:
		raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil || !strings.Contains(string(raw), `"name": "`+TSSDKPackage+`"`) {
			return &OptionError{"--sdk", fmt.Errorf("%s holds no package.json of %s: name the sdk/ts folder of an OpenFief checkout", dir, TSSDKPackage)}
		}
		if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
			return &OptionError{"--sdk", fmt.Errorf("%s has no dist/index.js: build the SDK first (npm ci and npm run build in that folder)", dir)}
		}
	}
	return nil
}
