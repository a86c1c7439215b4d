package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BuildType is the buildType of the SLSA provenance of OpenFief's images:
// docs/images.md (Attestations) says what its parameters mean.
const BuildType = "https://github.com/arkadiuss/openfief/images/build/v1"

// LocalBuilderID is the builder of a release made on a developer's machine
// (make release, make attest); CI passes its workflow's URI instead.
const LocalBuilderID = SourceURL + "/hack/release@local"

// buildEnv is the part of goEnv that changes the output; the rest of the
// caller's environment does not reach the binaries.
var buildEnv = []string{"CGO_ENABLED=0", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOFLAGS="}

// Provenance says how an index was built, for its SLSA v1 provenance.
type Provenance struct {
	// BuilderID is runDetails.builder.id: who ran the build (CI's workflow
	// URI, or LocalBuilderID); required.
	BuilderID string
	// Command is the exact command that built the index, such as
	// `make release VERSION=v1.2.3`; required.
	Command string
	// LinkStrings are the Options.LinkStrings of the build, by image name
	// then symbol: each value's SHA-256 is recorded (a release links its
	// catalog into the operator, and the catalog is published beside it).
	LinkStrings map[string]map[string]string
	// StartedOn and FinishedOn are recorded only when set: the predicate
	// has no wall-clock time of its own, so the same build gives the same
	// bytes.
	StartedOn, FinishedOn time.Time
}

func (p Provenance) check() error {
	var errs []error
	if p.BuilderID == "" {
		errs = append(errs, errors.New("provenance: the builder id is required"))
	}
	if p.Command == "" {
		errs = append(errs, errors.New("provenance: the build command is required"))
	}
	return errors.Join(errs...)
}

// Predicate is the SLSA v1 provenance predicate of b, built from res: the
// build type, the image, version, platforms and command as external
// parameters, the Go version, SOURCE_DATE_EPOCH, GoFlags, the fixed
// environment and the hashes of any link strings as internal ones, and the source commit as the one resolved
// dependency (the images have no base image: every file in them is built
// from the source). Its JSON keys are sorted and it is compact, so the same
// build gives the same bytes.
func (p Provenance) Predicate(res *Result, b Built) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	src := res.Source
	var platforms []any
	for _, pl := range res.Platforms {
		platforms = append(platforms, pl.String())
	}
	flags := make([]any, len(GoFlags))
	for i, f := range GoFlags {
		flags[i] = f
	}
	env := make([]any, len(buildEnv))
	for i, e := range buildEnv {
		env[i] = e
	}
	ext, err := structpb.NewStruct(map[string]any{
		"image":     b.Spec.Name,
		"package":   b.Spec.Package,
		"version":   src.Version,
		"platforms": platforms,
		"command":   p.Command,
	})
	if err != nil {
		return nil, err
	}
	internal := map[string]any{
		"goVersion":       res.GoVersion,
		"sourceDateEpoch": strconv.FormatInt(src.Epoch.Unix(), 10),
		"goFlags":         flags,
		"env":             env,
	}
	if src.Dirty != "" {
		internal["uncommittedChanges"] = src.Dirty
	}
	if vars := p.LinkStrings[b.Spec.Name]; len(vars) > 0 {
		linked := map[string]any{}
		for sym, v := range vars {
			sum := sha256.Sum256([]byte(v))
			linked[sym] = "sha256:" + hex.EncodeToString(sum[:])
		}
		internal["linkStrings"] = linked
	}
	in, err := structpb.NewStruct(internal)
	if err != nil {
		return nil, err
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:          BuildType,
			ExternalParameters: ext,
			InternalParameters: in,
			ResolvedDependencies: []*intoto.ResourceDescriptor{{
				Uri:    "git+" + SourceURL,
				Digest: map[string]string{"gitCommit": src.Commit},
			}},
		},
		RunDetails: &slsa.RunDetails{Builder: &slsa.Builder{Id: p.BuilderID}},
	}
	if !p.StartedOn.IsZero() || !p.FinishedOn.IsZero() {
		md := &slsa.BuildMetadata{}
		if !p.StartedOn.IsZero() {
			md.StartedOn = timestamppb.New(p.StartedOn)
		}
		if !p.FinishedOn.IsZero() {
			md.FinishedOn = timestamppb.New(p.FinishedOn)
		}
		pred.RunDetails.Metadata = md
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("provenance %s: %w", b.Spec.Name, err)
	}
	raw, err := protojson.Marshal(pred)
	if err != nil {
		return nil, err
	}
	return canonicalJSON(raw)
}

// canonicalJSON re-encodes raw with sorted keys and no spaces: protojson
// varies its whitespace on purpose, and this removes the variation.
func canonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
