package catalog

import "testing"

// TestLoad checks that the released catalog parses strictly; it lists no
// plugin yet (D-43).
func TestLoad(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Len() != 0 {
		t.Errorf("Load: %d entries, want none until the first plugin is verified", c.Len())
	}
}

func TestFileIsACopy(t *testing.T) {
	f := File()
	f[0] = 'x'
	if _, err := Load(); err != nil {
		t.Fatalf("changing File's result changed the embedded catalog: %v", err)
	}
}
