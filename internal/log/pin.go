package log

import (
	"errors"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// Pinned is a Chunk whose file descriptor stays open until Release: the FileCache does not close it while idle,
// and neither retention's FileDeleteDelay nor Close closes it under its user (they close it at the last Release).
// A fetch pins the chunks it sends by reference (splice) from the moment it has located them until the bytes
// are on the socket, so a segment deleted by retention or replaced by the cleaner meanwhile is still sent from
// the file the chunk was read from: an unlinked or renamed-over file keeps its bytes while a descriptor holds it,
// and segment files are never truncated below a size readers have seen.
type Pinned struct {
	// File is the underlying descriptor (an *os.File with vfs.OS), not the cache's wrapper.
	File      vfs.File
	Pos, Size int64
	release   func()
}

// Release lets the descriptor be closed again. Call it once, after the last use of File.
func (p Pinned) Release() {
	if p.release != nil {
		p.release()
	}
}

// Pin pins every chunk of r, in order. When a chunk cannot be pinned (its segment was deleted and its descriptor
// already closed, or Close ran: wrapping os.ErrClosed; out of descriptors), the ones already pinned are released
// and the error is returned; the caller should Read again or answer the error.
func (r ReadResult) Pin() ([]Pinned, error) {
	out := make([]Pinned, 0, len(r.Chunks))
	for _, c := range r.Chunks {
		p, err := pin(c)
		if err != nil {
			for _, q := range out {
				q.Release()
			}
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func pin(c Chunk) (Pinned, error) {
	lf, ok := c.File.(*lazyFile)
	if !ok {
		if c.File == nil {
			return Pinned{}, errors.New("log: pin of a chunk without a file")
		}
		return Pinned{File: c.File, Pos: c.Pos, Size: c.Size}, nil // not cached: it is not closed under us either
	}
	f, err := lf.acquire()
	if err != nil {
		return Pinned{}, err
	}
	return Pinned{File: f, Pos: c.Pos, Size: c.Size, release: lf.release}, nil
}
