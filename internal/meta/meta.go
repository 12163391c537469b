// Package meta is the topic catalog: topic names, topic IDs, partition counts
// and per-topic config overrides. It is persisted as one versioned JSON file
// written by vfs.WriteFileAtomic (write-temp, fsync, rename, fsync-dir), so a crash leaves either the
// old or the new catalog, never a torn one.
//
// A Catalog is safe for concurrent use; one mutex guards the map and the file.
package meta

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/kawa-broker/kawa/internal/batch"
	"github.com/kawa-broker/kawa/internal/vfs"
)

// Topic is one topic's durable metadata.
type Topic struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"` // overrides of broker defaults
	Internal   bool              `json:"internal,omitempty"`
}

// Errors returned by Catalog methods.
var (
	ErrExists   = errors.New("meta: topic already exists")
	ErrNotFound = errors.New("meta: topic not found")
)

const fileName = "topics.json"
const formatVersion = 1

type file struct {
	Version int     `json:"version"`
	Topics  []Topic `json:"topics"`
	CRC     uint32  `json:"crc"` // CRC-32C of the topics JSON
}

// Catalog holds all topics. The zero value is not usable; call Open.
type Catalog struct {
	mu     sync.Mutex
	fs     vfs.FS
	dir    string
	topics map[string]Topic
}

// Open loads the catalog from dir in fsys (nil: vfs.OS), creating dir durably
// and an empty catalog if absent.
func Open(fsys vfs.FS, dir string) (*Catalog, error) {
	if fsys == nil {
		fsys = vfs.OS
	}
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	c := &Catalog{fs: fsys, dir: dir, topics: map[string]Topic{}}
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, fileName))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meta: read catalog: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("meta: decode %s: %w", fileName, err)
	}
	if f.Version != formatVersion {
		return nil, fmt.Errorf("meta: %s has version %d, want %d", fileName, f.Version, formatVersion)
	}
	if crcOf(f.Topics) != f.CRC {
		return nil, fmt.Errorf("meta: %s checksum mismatch", fileName)
	}
	for _, t := range f.Topics {
		c.topics[t.Name] = t
	}
	return c, nil
}

func crcOf(ts []Topic) uint32 {
	b, _ := json.Marshal(ts)
	return batch.Checksum(b)
}

// Get returns the named topic.
func (c *Catalog) Get(name string) (Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	return t, ok
}

// ByID returns the topic with the given topic ID.
func (c *Catalog) ByID(id [16]byte) (Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.topics {
		if t.ID == id {
			return t, true
		}
	}
	return Topic{}, false
}

// List returns all topics sorted by name.
func (c *Catalog) List() []Topic {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Topic, 0, len(c.topics))
	for _, t := range c.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Create adds a topic with a fresh random topic ID and persists the catalog
// before returning. ErrExists if the name is taken.
func (c *Catalog) Create(t Topic) (Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[t.Name]; ok {
		return Topic{}, ErrExists
	}
	if t.ID == ([16]byte{}) {
		_, _ = rand.Read(t.ID[:])
	}
	c.topics[t.Name] = t
	if err := c.saveLocked(); err != nil {
		delete(c.topics, t.Name)
		return Topic{}, err
	}
	return t, nil
}

// Update replaces an existing topic (partition count, configs) durably.
func (c *Catalog) Update(t Topic) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.topics[t.Name]
	if !ok {
		return ErrNotFound
	}
	c.topics[t.Name] = t
	if err := c.saveLocked(); err != nil {
		c.topics[t.Name] = old
		return err
	}
	return nil
}

// Delete removes a topic durably.
func (c *Catalog) Delete(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.topics[name]
	if !ok {
		return ErrNotFound
	}
	delete(c.topics, name)
	if err := c.saveLocked(); err != nil {
		c.topics[name] = old
		return err
	}
	return nil
}

func (c *Catalog) saveLocked() error {
	ts := make([]Topic, 0, len(c.topics))
	for _, t := range c.topics {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	b, err := json.MarshalIndent(file{Version: formatVersion, Topics: ts, CRC: crcOf(ts)}, "", "  ")
	if err != nil {
		return fmt.Errorf("meta: encode: %w", err)
	}
	if err := vfs.WriteFileAtomic(c.fs, filepath.Join(c.dir, fileName), b); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	return nil
}
