package meta

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCatalogPersists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := Open(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Create(Topic{Name: "a", Partitions: 3, Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(Topic{Name: "a", Partitions: 1}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if _, err := c.Create(Topic{Name: "b", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("b"); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c2.Get("a")
	if !ok || got.Partitions != 3 || got.ID != a.ID || got.Configs["retention.ms"] != "1000" {
		t.Fatalf("reopened topic a = %+v, %v", got, ok)
	}
	if _, ok := c2.Get("b"); ok {
		t.Fatal("deleted topic b came back after reopen")
	}
	if bid, ok := c2.ByID(a.ID); !ok || bid.Name != "a" {
		t.Fatalf("ByID = %+v %v", bid, ok)
	}
}

func TestCatalogRejectsCorruptFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, _ := Open(nil, dir)
	if _, err := c.Create(Topic{Name: "a", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fileName)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(nil, dir); err == nil {
		t.Fatal("Open accepted a corrupted catalog")
	}
}
