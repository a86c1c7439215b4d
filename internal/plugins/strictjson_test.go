package plugins

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// hostileLabel nests open in itself until the label is size bytes long.
func hostileLabel(open string, size int) string {
	return `{"configSchema":` + strings.Repeat(open, (size-20)/len(open))
}

// allocatedBy reports the bytes fn allocates (the heap's running total, so
// it counts what the collector already freed).
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestStrictDecodeDepthIsBounded is the regression test of the adversarial
// review's first finding: a label nested 20,000 levels deep (40 KB) made the
// walk allocate ~620 MiB, because it built a path string per level; the
// label's 256 KiB cap allowed ~120,000 levels. Now every label up to the cap
// is refused at MaxJSONDepth, naming the path, within a few MiB.
func TestStrictDecodeDepthIsBounded(t *testing.T) {
	for name, open := range map[string]string{
		"arrays":  `[`,
		"objects": `{"a":`,
		"mixed":   `[{"k":`,
	} {
		t.Run(name, func(t *testing.T) {
			label := hostileLabel(open, maxManifestLabelLen)
			var err error
			alloc := allocatedBy(func() { _, err = ParseManifestLabel(label) })
			if !errors.Is(err, ErrInvalidLabel) || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
				t.Fatalf("err = %v, want ErrInvalidLabel for nesting", err)
			}
			if fe := (*FieldError)(nil); !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "label.configSchema") {
				t.Fatalf("err = %v, want a field under label.configSchema", err)
			}
			if alloc > 4<<20 {
				t.Fatalf("a %d KiB label allocated %d KiB, want at most 4 MiB", len(label)>>10, alloc>>10)
			}
		})
	}
}

// TestStrictDecodeAcceptsDeepLegitimateSchema checks the bound leaves room
// for real config schemas: 60 levels of nested properties parse.
func TestStrictDecodeAcceptsDeepLegitimateSchema(t *testing.T) {
	const levels = 30 // two JSON levels each: {"properties":{"x":...}}
	schema := strings.Repeat(`{"type":"object","properties":{"x":`, levels) + `{"type":"string"}` + strings.Repeat(`}}`, levels)
	label := `{"capabilities":["connector"],"configSchema":` + schema + `}`
	if _, err := ParseManifestLabel(label); err != nil {
		t.Fatalf("a %d-level schema was refused: %v", 2*levels, err)
	}
	tooDeep := `{"capabilities":["connector"],"configSchema":` + strings.Repeat(`[`, MaxJSONDepth) + strings.Repeat(`]`, MaxJSONDepth) + `}`
	if _, err := ParseManifestLabel(tooDeep); !errors.Is(err, ErrInvalidLabel) {
		t.Fatalf("nesting %d levels under configSchema: err = %v, want ErrInvalidLabel", MaxJSONDepth+1, err)
	}
}

// BenchmarkParseHostileLabel measures the refusal of a 256 KiB label nested
// as deep as it can be (compare with BenchmarkParseManifestLabel's
// legitimate label, if present, in the same run).
func BenchmarkParseHostileLabel(b *testing.B) {
	label := hostileLabel(`[`, maxManifestLabelLen)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseManifestLabel(label); err == nil {
			b.Fatal("accepted")
		}
	}
}

// FuzzManifestLabelNesting feeds labels of any shape and nesting: parsing
// never panics, a label nested deeper than MaxJSONDepth is always refused
// for its nesting, and the work stays linear (the fuzzer's own time limit
// per input catches a quadratic walk).
func FuzzManifestLabelNesting(f *testing.F) {
	f.Add(`[{"a":`, 70, `{"capabilities":["connector"]}`)
	f.Add(`{"x":`, 63, ``)
	f.Add(`[`, 5000, `[]`)
	f.Fuzz(func(t *testing.T, open string, depth int, inner string) {
		if open == "" || depth < 0 || depth > 20000 || len(open)*depth > maxManifestLabelLen {
			return
		}
		label := `{"configSchema":` + strings.Repeat(open, depth) + inner
		_, err := ParseManifestLabel(label)
		opens := strings.Count(open, "[") + strings.Count(open, "{")
		if opens > 0 && strings.Count(open, "]") == 0 && strings.Count(open, "}") == 0 &&
			!strings.ContainsAny(open, `"\`) && opens*depth >= MaxJSONDepth && err == nil {
			t.Fatalf("a label nested %d levels deep was accepted", opens*depth+1)
		}
	})
}
