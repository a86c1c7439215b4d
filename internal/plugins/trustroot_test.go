package plugins

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func trustRootData(extra map[string]string) map[string]string {
	d := map[string]string{
		TrustRootTimestampKey: "ts", TrustRootSnapshotKey: "snap", TrustRootTargetsKey: "targets", TrustRootTargetKey: "root",
	}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

func TestParseTrustRootFiles(t *testing.T) {
	got, err := ParseTrustRootFiles(trustRootData(map[string]string{"16.root.json": "r16", "15.root.json": "r15"}))
	if err != nil {
		t.Fatal(err)
	}
	want := TrustRootFiles{Roots: [][]byte{[]byte("r15"), []byte("r16")}, RootVersions: []int64{15, 16},
		Timestamp: []byte("ts"), Snapshot: []byte("snap"), Targets: []byte("targets"), TrustedRoot: []byte("root")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTrustRootFiles = %+v, want %+v", got, want)
	}

	for name, c := range map[string]struct {
		data  map[string]string
		field string
	}{
		"no timestamp":     {data: func() map[string]string { d := trustRootData(nil); delete(d, TrustRootTimestampKey); return d }(), field: TrustRootTimestampKey},
		"unknown key":      {data: trustRootData(map[string]string{"root.json": "x"}), field: "root.json"},
		"leading zero":     {data: trustRootData(map[string]string{"015.root.json": "x"}), field: "015.root.json"},
		"version zero":     {data: trustRootData(map[string]string{"0.root.json": "x"}), field: "0.root.json"},
		"gap":              {data: trustRootData(map[string]string{"3.root.json": "x", "5.root.json": "y"}), field: "5.root.json"},
		"too long":         {data: trustRootData(map[string]string{TrustRootTargetKey: strings.Repeat("x", MaxTrustRootFile+1)}), field: TrustRootTargetKey},
		"unsafe key shown": {data: trustRootData(map[string]string{"a\x1bb": "x"}), field: `"a\x1bb"`},
		"huge version":     {data: trustRootData(map[string]string{"99999999999.root.json": "x"}), field: "99999999999.root.json"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTrustRootFiles(c.data)
			if !errors.Is(err, ErrInvalidTrustRoot) {
				t.Fatalf("err = %v, want ErrInvalidTrustRoot", err)
			}
			if !strings.Contains(err.Error(), c.field+":") {
				t.Errorf("err %q does not name %s", err, c.field)
			}
		})
	}
	many := trustRootData(nil)
	for v := 1; v <= MaxTrustRootChain+1; v++ {
		many[strconv.Itoa(v)+".root.json"] = "r"
	}
	if _, err := ParseTrustRootFiles(many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d root versions: %v, want refused", MaxTrustRootChain+1, err)
	}
}

func TestTrustRootFingerprint(t *testing.T) {
	a := TrustRootFingerprint(map[string]string{"ab": "c"})
	b := TrustRootFingerprint(map[string]string{"a": "bc"})
	if a == b || len(a) != 64 {
		t.Errorf("fingerprints %q and %q of different content", a, b)
	}
	if TrustRootFingerprint(nil) != "" || TrustRootFingerprint(map[string]string{}) != "" {
		t.Error("no content has a fingerprint")
	}
}

func TestTrustRootStatus(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	s := TrustRootStatus{Source: TrustRootFromConfigMap, SHA256: hex, ConfigMap: hex, RootVersion: 2, TargetsVersion: 3,
		Refused: &TrustRootRefusal{ConfigMap: hex, Reason: "timestamp.json: bad\x1b[31m" + strings.Repeat("é", MaxTrustRootReason)}}
	raw, err := EncodeTrustRootStatus(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTrustRootStatus([]byte(raw))
	if err != nil {
		t.Fatalf("ParseTrustRootStatus(%s): %v", raw, err)
	}
	if got.Refused == nil || len(got.Refused.Reason) > MaxTrustRootReason || !strings.HasPrefix(got.Refused.Reason, "timestamp.json: bad?[31m") {
		t.Errorf("reason not made safe and bounded: %+v", got.Refused)
	}
	for name, c := range map[string]struct{ raw, field string }{
		"unknown source":   {`{"source":"web","sha256":"` + hex + `"}`, "source"},
		"bad digest":       {`{"source":"embedded","sha256":"AB"}`, "sha256"},
		"embedded with cm": {`{"source":"embedded","sha256":"` + hex + `","configMap":"` + hex + `"}`, "configMap"},
		"unknown field":    {`{"source":"embedded","sha256":"` + hex + `","x":1}`, "x"},
		"unsafe reason":    {`{"source":"embedded","sha256":"` + hex + `","refused":{"configMap":"` + hex + `","reason":"\u202e"}}`, "refused.reason"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTrustRootStatus([]byte(c.raw))
			if !errors.Is(err, ErrInvalidTrustRoot) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("err = %v, want ErrInvalidTrustRoot naming %s", err, c.field)
			}
		})
	}
}

// FuzzParseTrustRootFiles: any ConfigMap content is refused with
// ErrInvalidTrustRoot or read into bounded files whose root versions follow
// each other.
func FuzzParseTrustRootFiles(f *testing.F) {
	f.Add("15.root.json", "a", "16.root.json", "b")
	f.Add("timestamp.json", "a", "trusted_root.json", "b")
	f.Add("1.root.json", "", "01.root.json", "")
	f.Add("\xff.root.json", "x", "3.root.json", "y")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		files, err := ParseTrustRootFiles(trustRootData(map[string]string{k1: v1, k2: v2}))
		if err != nil {
			if !errors.Is(err, ErrInvalidTrustRoot) {
				t.Fatalf("error %v does not wrap ErrInvalidTrustRoot", err)
			}
			// errors.Join puts each error on a line of its own.
			for _, line := range strings.Split(err.Error(), "\n") {
				if CheckText(line, 0) != nil {
					t.Fatalf("error %q holds unsafe text", err)
				}
			}
			return
		}
		if len(files.Roots) != len(files.RootVersions) || len(files.Roots) > MaxTrustRootChain {
			t.Fatalf("roots %d, versions %d", len(files.Roots), len(files.RootVersions))
		}
		for i, v := range files.RootVersions {
			if v < 1 || i > 0 && v != files.RootVersions[i-1]+1 {
				t.Fatalf("root versions %v", files.RootVersions)
			}
		}
		for _, b := range [][]byte{files.Timestamp, files.Snapshot, files.Targets, files.TrustedRoot} {
			if len(b) > MaxTrustRootFile {
				t.Fatalf("a file of %d bytes", len(b))
			}
		}
	})
}

// FuzzParseTrustRootStatus: the status is refused with ErrInvalidTrustRoot
// or valid, safe to show, and the same after a trip through its encoder.
func FuzzParseTrustRootStatus(f *testing.F) {
	hex := strings.Repeat("0f", 32)
	f.Add(`{"source":"embedded","sha256":"` + hex + `"}`)
	f.Add(`{"source":"configmap","sha256":"` + hex + `","configMap":"` + hex + `","rootVersion":15,"targetsVersion":9,"refused":{"configMap":"` + hex + `","reason":"x"}}`)
	f.Add(`{"source":"embedded","sha256":"` + hex + `","rootVersion":-1}`)
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := ParseTrustRootStatus([]byte(raw))
		if err != nil {
			if !errors.Is(err, ErrInvalidTrustRoot) {
				t.Fatalf("error %v does not wrap ErrInvalidTrustRoot", err)
			}
			return
		}
		if s.Refused != nil && CheckText(s.Refused.Reason, MaxTrustRootReason) != nil {
			t.Fatalf("an unsafe reason accepted: %q", s.Refused.Reason)
		}
		enc, err := EncodeTrustRootStatus(s)
		if err != nil {
			t.Fatalf("a parsed status does not encode: %v", err)
		}
		again, err := ParseTrustRootStatus([]byte(enc))
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, s)
		}
	})
}
