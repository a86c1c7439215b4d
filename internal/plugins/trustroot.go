package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The Sigstore trust root an admin may install without a new release: a
// copy of a TUF repository's metadata and its trusted_root.json target in
// the ConfigMap TrustRootConfigMap, verified offline against the root the
// verifier trusts already, and what the operator publishes of the root it
// uses in TrustRootStatusConfigMap, which `openfief check` reads.
const (
	// TrustRootConfigMap is the admin's ConfigMap in Namespace. Its keys are
	// the TUF repository's file names: TrustRootTimestampKey,
	// TrustRootSnapshotKey, TrustRootTargetsKey, TrustRootTargetKey and, for
	// each root version after the one the verifier starts from, "N.root.json".
	TrustRootConfigMap = "openfief-sigstore-root"
	// TrustRootStatusConfigMap is where the operator publishes which root it
	// uses and why it refused the admin's content, if it did, under
	// TrustRootStatusKey.
	TrustRootStatusConfigMap = "openfief-sigstore-root-status"
	TrustRootStatusKey       = "status.json"

	TrustRootTimestampKey = "timestamp.json"
	TrustRootSnapshotKey  = "snapshot.json"
	TrustRootTargetsKey   = "targets.json"
	// TrustRootTargetKey is both the ConfigMap key and the TUF target name
	// of the Sigstore trusted root.
	TrustRootTargetKey = "trusted_root.json"
	// trustRootRootSuffix ends the key of each root version in the chain.
	trustRootRootSuffix = ".root.json"

	// MaxTrustRootFile bounds each file of the ConfigMap; the public-good
	// instance's are a few KiB each.
	MaxTrustRootFile = 256 << 10
	// MaxTrustRootChain bounds how many root versions the ConfigMap may hold.
	MaxTrustRootChain = 64
)

// Where the root in use came from (TrustRootStatus.Source).
const (
	// TrustRootEmbedded is the root the release was built with.
	TrustRootEmbedded = "embedded"
	// TrustRootFromConfigMap is the root of the admin's ConfigMap.
	TrustRootFromConfigMap = "configmap"
)

// ErrInvalidTrustRoot means the admin's trust root ConfigMap or the operator's
// status of it does not follow the rules.
var ErrInvalidTrustRoot = errors.New("invalid trust root")

// TrustRootFiles are the files of one TrustRootConfigMap, bounded and named
// but not yet verified (that needs the TUF metadata's signatures, which the
// trust/cosign adapter checks).
type TrustRootFiles struct {
	// Roots are the root metadata versions in ascending, consecutive order;
	// RootVersions their versions.
	Roots        [][]byte
	RootVersions []int64
	Timestamp    []byte
	Snapshot     []byte
	Targets      []byte
	// TrustedRoot is the trusted_root.json target.
	TrustedRoot []byte
}

// ParseTrustRootFiles reads the data of TrustRootConfigMap: every key is one
// of the four fixed names or "N.root.json" (N a version from 1, without
// leading zeros), the four fixed keys are present, each value is at most
// MaxTrustRootFile bytes, at most MaxTrustRootChain root versions are
// given and they follow each other without a gap. Every broken rule is
// reported, each naming its key; errors wrap ErrInvalidTrustRoot.
func ParseTrustRootFiles(data map[string]string) (TrustRootFiles, error) {
	var errs fieldErrors
	var f TrustRootFiles
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type versioned struct {
		v   int64
		raw []byte
	}
	var roots []versioned
	for _, k := range keys {
		v := data[k]
		if len(v) > MaxTrustRootFile {
			errs.add(quoteKey(k), ErrInvalidTrustRoot, fmt.Sprintf("longer than %d bytes", MaxTrustRootFile))
			continue
		}
		switch k {
		case TrustRootTimestampKey:
			f.Timestamp = []byte(v)
		case TrustRootSnapshotKey:
			f.Snapshot = []byte(v)
		case TrustRootTargetsKey:
			f.Targets = []byte(v)
		case TrustRootTargetKey:
			f.TrustedRoot = []byte(v)
		default:
			n, ok := rootVersion(k)
			if !ok {
				errs.add(quoteKey(k), ErrInvalidTrustRoot, "not a file of a TUF repository: keys are "+
					TrustRootTimestampKey+", "+TrustRootSnapshotKey+", "+TrustRootTargetsKey+", "+TrustRootTargetKey+" and N"+trustRootRootSuffix)
				continue
			}
			roots = append(roots, versioned{v: n, raw: []byte(v)})
		}
	}
	for _, k := range []string{TrustRootTimestampKey, TrustRootSnapshotKey, TrustRootTargetsKey, TrustRootTargetKey} {
		if _, ok := data[k]; !ok {
			errs.add(k, ErrInvalidTrustRoot, "required")
		}
	}
	if len(roots) > MaxTrustRootChain {
		errs.add("N"+trustRootRootSuffix, ErrInvalidTrustRoot, fmt.Sprintf("%d root versions, at most %d", len(roots), MaxTrustRootChain))
	}
	slices.SortFunc(roots, func(a, b versioned) int { return cmpInt64(a.v, b.v) })
	for i, r := range roots {
		if i > 0 && r.v != roots[i-1].v+1 {
			errs.add(fmt.Sprintf("%d%s", r.v, trustRootRootSuffix), ErrInvalidTrustRoot,
				fmt.Sprintf("root versions must follow each other: %d comes after %d", r.v, roots[i-1].v))
		}
		f.Roots = append(f.Roots, r.raw)
		f.RootVersions = append(f.RootVersions, r.v)
	}
	if err := errs.err(); err != nil {
		return TrustRootFiles{}, err
	}
	return f, nil
}

// maxRootVersion bounds N in "N.root.json"; TUF versions are integers and
// the public-good instance is at a few dozen.
const maxRootVersion = 1 << 31

// rootVersion reads N from "N.root.json".
func rootVersion(key string) (int64, bool) {
	num, ok := strings.CutSuffix(key, trustRootRootSuffix)
	if !ok || num == "" || len(num) > 10 || num[0] == '0' {
		return 0, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > maxRootVersion {
		return 0, false
	}
	return n, true
}

// quoteKey shows a ConfigMap key in an error: as written when it is plain,
// quoted (with escapes) otherwise, and cut to a bound.
func quoteKey(k string) string {
	const maxShown = 80
	plain := utf8.ValidString(k) && len(k) <= maxShown
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			plain = false
			break
		}
	}
	if plain {
		return k
	}
	if len(k) > maxShown {
		k = k[:maxShown]
	}
	return strconv.QuoteToASCII(k)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TrustRootFingerprint names one content of TrustRootConfigMap: the sha256
// of its keys and values in key order, each length-prefixed, in hex. Empty
// data (or none) is "".
func TrustRootFingerprint(data map[string]string) string {
	if len(data) == 0 {
		return ""
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(data[k]), data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TrustRootStatus is what the operator publishes of the Sigstore trust root
// it verifies keyless signatures with, as TrustRootStatusKey's JSON.
type TrustRootStatus struct {
	// Source is TrustRootEmbedded or TrustRootFromConfigMap.
	Source string `json:"source"`
	// SHA256 is the hex sha256 of the trusted_root.json in use.
	SHA256 string `json:"sha256"`
	// ConfigMap is the TrustRootFingerprint of the admin's content in use;
	// empty for the embedded root.
	ConfigMap string `json:"configMap,omitempty"`
	// RootVersion and TargetsVersion are the TUF root and targets versions
	// the root in use was verified through; 0 for the embedded root.
	RootVersion    int64 `json:"rootVersion,omitempty"`
	TargetsVersion int64 `json:"targetsVersion,omitempty"`
	// Refused, when set, is the admin's content the operator refused last,
	// which it did not replace the root in use with.
	Refused *TrustRootRefusal `json:"refused,omitempty"`
}

// TrustRootRefusal is one content of the admin's ConfigMap the operator
// refused and why.
type TrustRootRefusal struct {
	// ConfigMap is the refused content's TrustRootFingerprint.
	ConfigMap string `json:"configMap"`
	// Reason names the file and the rule it broke.
	Reason string `json:"reason"`
}

// MaxTrustRootReason bounds a refusal's reason as published.
const MaxTrustRootReason = 1024

// maxTrustRootStatus bounds the status document.
const maxTrustRootStatus = 8 << 10

// EncodeTrustRootStatus writes s as TrustRootStatusKey's JSON, the reason
// cut to MaxTrustRootReason bytes (at a character boundary).
func EncodeTrustRootStatus(s TrustRootStatus) (string, error) {
	if s.Refused != nil {
		r := *s.Refused
		r.Reason = SafeReason(r.Reason, MaxTrustRootReason)
		s.Refused = &r
	}
	if err := s.validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ParseTrustRootStatus reads TrustRootStatusKey's JSON strictly: known
// fields only, a known source, hex sha256s, versions not negative, a
// reason of safe text within MaxTrustRootReason. Errors wrap
// ErrInvalidTrustRoot and name the field.
func ParseTrustRootStatus(raw []byte) (TrustRootStatus, error) {
	if len(raw) > maxTrustRootStatus {
		return TrustRootStatus{}, &FieldError{Field: TrustRootStatusKey, Err: ErrInvalidTrustRoot, Detail: fmt.Sprintf("longer than %d bytes", maxTrustRootStatus)}
	}
	var s TrustRootStatus
	if path, err := strictDecode(raw, &s); err != nil {
		return TrustRootStatus{}, &FieldError{Field: orDocument(path, TrustRootStatusKey), Err: ErrInvalidTrustRoot, Detail: err.Error()}
	}
	if err := s.validate(); err != nil {
		return TrustRootStatus{}, err
	}
	return s, nil
}

func (s TrustRootStatus) validate() error {
	var errs fieldErrors
	switch s.Source {
	case TrustRootEmbedded:
		if s.ConfigMap != "" {
			errs.add("configMap", ErrInvalidTrustRoot, "set for the embedded root")
		}
	case TrustRootFromConfigMap:
		if !isSHA256Hex(s.ConfigMap) {
			errs.add("configMap", ErrInvalidTrustRoot, "not 64 lower-case hex digits")
		}
	default:
		errs.add("source", ErrInvalidTrustRoot, fmt.Sprintf("not %s or %s", TrustRootEmbedded, TrustRootFromConfigMap))
	}
	if !isSHA256Hex(s.SHA256) {
		errs.add("sha256", ErrInvalidTrustRoot, "not 64 lower-case hex digits")
	}
	if s.RootVersion < 0 || s.TargetsVersion < 0 {
		errs.add("rootVersion", ErrInvalidTrustRoot, "negative")
	}
	if r := s.Refused; r != nil {
		if !isSHA256Hex(r.ConfigMap) {
			errs.add("refused.configMap", ErrInvalidTrustRoot, "not 64 lower-case hex digits")
		}
		if err := CheckText(r.Reason, MaxTrustRootReason); err != nil {
			errs.add("refused.reason", ErrInvalidTrustRoot, err.Error())
		}
	}
	return errs.err()
}

// SafeReason makes s fit a refusal's reason: each unsafe character
// (IsUnsafeRune) or byte of invalid UTF-8 becomes '?', and the result is
// cut to at most maxLen bytes at a character boundary.
func SafeReason(s string, maxLen int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || IsUnsafeRune(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > maxLen {
			break
		}
		b.WriteRune(r)
		i += size
	}
	return b.String()
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
