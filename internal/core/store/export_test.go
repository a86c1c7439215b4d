package store

// SetImportHook installs hook between the statements of s's imports, for
// the failure-injection tests; nil removes it.
func SetImportHook(s *Store, hook func(step int) error) { s.hook = hook }
