package partition

import (
	"os"
	"path/filepath"
	"testing"
)

func removeGlob(t *testing.T, dir, pattern string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	for _, f := range m {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}
