package configschema

import (
	"crypto/sha256"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// typicalSchema is a config schema of the size first-party plugins ship.
const typicalSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["account", "currency"],
  "properties": {
    "account":  {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9_-]+$"},
    "currency": {"enum": ["PLN", "EUR", "USD", "GBP", "CHF"]},
    "from":     {"type": "string", "format": "date"},
    "tables":   {"type": "array", "items": {"enum": ["A", "B", "C"]}, "uniqueItems": true, "maxItems": 3},
    "retries":  {"type": "integer", "minimum": 0, "maximum": 10},
    "endpoint": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}}
  }
}`

const typicalConfig = `{"account":"main","currency":"PLN","tables":["A","C"],"retries":3}`

func TestCompileCachedReturnsOneSchemaPerBytes(t *testing.T) {
	first, err := compileCached([]byte(typicalSchema))
	if err != nil {
		t.Fatal(err)
	}
	again, err := compileCached([]byte(typicalSchema))
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatal("the same schema bytes were compiled again")
	}
	other, err := compileCached([]byte(typicalSchema + " "))
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Fatal("different bytes got the cached schema of others")
	}
}

func TestCompileCachedKeepsRefusals(t *testing.T) {
	refused := []byte(`{"$ref":"https://example.com/other.json"}`)
	_, first := compileCached(refused)
	if !errors.Is(first, ErrSchemaRefRefused) {
		t.Fatalf("first compile: %v, want ErrSchemaRefRefused", first)
	}
	if _, ok := compiledSchemas.get(sha256.Sum256(refused)); !ok {
		t.Fatal("the refusal was not cached")
	}
	// Validate answers from the cache with the same refusal.
	if err := Validate(refused, []byte(`{}`)); !errors.Is(err, ErrSchemaRefRefused) || err.Error() != first.Error() {
		t.Fatalf("Validate = %v, want %v", err, first)
	}
}

func TestSchemaCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newSchemaCache(2)
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte(strconv.Itoa(i))) }
	c.put(key(1), compileResult{})
	c.put(key(2), compileResult{})
	c.get(key(1)) // 2 is now the least recently used
	c.put(key(3), compileResult{})
	if c.len() != 2 {
		t.Fatalf("len = %d, want 2", c.len())
	}
	for i, want := range map[int]bool{1: true, 2: false, 3: true} {
		if _, ok := c.get(key(i)); ok != want {
			t.Errorf("entry %d cached = %v, want %v", i, ok, want)
		}
	}
}

func TestValidateSharesCompiledSchemaAcrossGoroutines(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				ok := Validate([]byte(typicalSchema), []byte(typicalConfig))
				bad := Validate([]byte(typicalSchema), []byte(`{"account":"main","currency":"XXX"}`))
				if ok != nil || !errors.Is(bad, ErrInvalidConfig) {
					t.Errorf("goroutine %d: valid config: %v; invalid config: %v", i, ok, bad)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkValidateCompiledCache compares Validate, whose compiled schema
// comes from the cache, with compiling the schema on every call as Validate
// did before (the operator validates on every reconcile). The two alternate
// within each iteration; it reports each one's µs/op and cached/compile.
func BenchmarkValidateCompiledCache(b *testing.B) {
	for name, c := range map[string][2]string{
		"typical": {typicalSchema, typicalConfig},
		"plain":   {`{"type":"object","properties":{"account":{"type":"string"}}}`, `{"account":"main"}`},
	} {
		b.Run(name, func(b *testing.B) {
			schema, config := []byte(c[0]), []byte(c[1])
			var cached, compile time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				if err := Validate(schema, config); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := validateConfig(schema, config, func(string) {}); err != nil {
					b.Fatal(err)
				}
				cached += mid.Sub(start)
				compile += time.Since(mid)
				n++
			}
			b.ReportMetric(float64(cached)/1e3/float64(n), "cached-µs/op")
			b.ReportMetric(float64(compile)/1e3/float64(n), "compile-µs/op")
			b.ReportMetric(float64(cached)/float64(compile), "cached/compile")
		})
	}
}
