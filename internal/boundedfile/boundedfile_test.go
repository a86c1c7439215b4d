package boundedfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(file, 10); err != nil || string(got) != "0123456789" {
		t.Errorf("Read at the bound = %q, %v", got, err)
	}
	if _, err := Read(file, 9); err == nil || !strings.Contains(err.Error(), "longer than 9 bytes") {
		t.Errorf("Read past the bound: %v, want a refusal naming the bound", err)
	}
	if _, err := Read(filepath.Join(dir, "none"), 10); !os.IsNotExist(err) {
		t.Errorf("Read of a missing file: %v", err)
	}
}
