package configschema

import (
	"container/list"
	"crypto/sha256"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxCachedSchemas bounds how many compiled schemas the cache keeps. Plugins
// of one version share one schema, so a cluster holds as many distinct
// schemas as plugin versions, not instances; a compiled schema is a few
// times its JSON, which is at most maxSchemaBytes.
const maxCachedSchemas = 256

// compiledSchemas is the cache of compileConfigSchema results, errors included,
// keyed by the SHA-256 of the schema's bytes: the same bytes always compile
// to the same result, so an entry never goes stale and a hash collision is
// the only way to get another schema's answer (OF-14). The operator
// validates every Plugin's config on every reconcile, and a schema
// no longer compiles each time.
var compiledSchemas = newSchemaCache(maxCachedSchemas)

// compileCached is compileConfigSchema through the cache. The compiled
// schema is shared: jsonschema.Schema.Validate keeps its state per call.
func compileCached(schema []byte) (*jsonschema.Schema, error) {
	key := sha256.Sum256(schema)
	if e, ok := compiledSchemas.get(key); ok {
		return e.schema, e.err
	}
	s, err := compileConfigSchema(schema, nil)
	compiledSchemas.put(key, compileResult{schema: s, err: err})
	return s, err
}

// compileResult is one compile's outcome.
type compileResult struct {
	schema *jsonschema.Schema
	err    error
}

// schemaCache is a least-recently-used map of compile results, safe for
// concurrent use.
type schemaCache struct {
	max int

	mu      sync.Mutex
	order   *list.List // of *cacheEntry, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key    [sha256.Size]byte
	result compileResult
}

func newSchemaCache(maxEntries int) *schemaCache {
	return &schemaCache{max: maxEntries, order: list.New(), entries: map[[sha256.Size]byte]*list.Element{}}
}

func (c *schemaCache) get(key [sha256.Size]byte) (compileResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return compileResult{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).result, true
}

func (c *schemaCache) put(key [sha256.Size]byte, r compileResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, result: r})
	for c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
}

// len is how many results the cache holds.
func (c *schemaCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
