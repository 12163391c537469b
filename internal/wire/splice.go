package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kbin"
)

// FileRange is Size bytes of File from offset Pos, sent by reference in a
// response frame (splice(2)). The file must stay open and those bytes
// unchanged until the frame is written.
type FileRange struct {
	File      *os.File
	Pos, Size int64
}

// Splices lets a response carry file contents in a nullable bytes field
// (a Fetch partition's records, protocol guide "Fetch API") without
// reading them into memory, while kmsg still encodes every field:
// Placeholder returns a short stand-in to put in the field, the response is
// encoded as usual (AppendResponse), and Splice cuts the frame at each
// stand-in and returns the pieces to write, the stand-ins replaced by their
// file ranges and their length prefixes by the real lengths. Kawa substitutes
// byte ranges only; it encodes no field itself beyond the bytes field's
// length prefix (int32 before flexible versions, unsigned varint of length+1
// after, KIP-482), which kmsg wrote for the stand-in and Splice checks.
//
// A stand-in is a 16-byte random nonce, fresh per Splices, and a 4-byte
// index, so no other bytes of a frame (topic names, records copied into it)
// can be taken for one. A stand-in left out of the encoded response (its
// partition dropped from an incremental fetch's answer) is simply not sent.
// The zero Splices is not usable; use NewSplices.
type Splices struct {
	nonce  [16]byte
	ranges [][]FileRange
}

// placeholderLen is the length of a stand-in: nonce and index.
const placeholderLen = 16 + 4

// NewSplices returns a Splices with a fresh nonce.
func NewSplices() *Splices {
	s := &Splices{}
	_, _ = rand.Read(s.nonce[:]) // crypto/rand.Read does not fail (Go 1.24+)
	return s
}

// Len is the number of stand-ins made; 0 for a nil Splices.
func (s *Splices) Len() int {
	if s == nil {
		return 0
	}
	return len(s.ranges)
}

// Placeholder returns the stand-in for the concatenation of ranges, to be set
// as one bytes field of the response.
func (s *Splices) Placeholder(ranges []FileRange) []byte {
	b := make([]byte, 0, placeholderLen)
	b = append(b, s.nonce[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.ranges)))
	s.ranges = append(s.ranges, ranges)
	return b
}

// Piece is one part of a spliced frame, written in order: Bytes when File is
// nil, else the file range.
type Piece struct {
	Bytes []byte
	FileRange
}

// Splice returns the pieces of the frame that frame (one AppendResponse
// result holding every stand-in of s, flexible as the response's version)
// stands for: its size prefix and every stand-in's length prefix rewritten,
// each stand-in replaced by its file ranges. The byte pieces alias frame.
// An error (a stand-in out of order, cut off or not behind the length prefix
// kmsg writes; a frame over 2 GiB) means the frame must not be sent.
func (s *Splices) Splice(frame []byte, flexible bool) ([]Piece, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("wire: splice: %d byte frame", len(frame))
	}
	// Prefixes of the real lengths: 4 bytes of frame size, then at most 5 per stand-in. Allocated
	// whole up front, so the pieces' slices of it stay valid as it fills.
	prefixes := make([]byte, 4, 4+5*len(s.ranges))
	pieces := make([]Piece, 0, 2+3*len(s.ranges))
	pieces = append(pieces, Piece{Bytes: prefixes[:4]}) // filled in at the end
	size := int64(len(frame)) - 4
	at := 4 // next byte of frame not yet in a piece
	oldPrefix := 4
	if flexible {
		oldPrefix = 1
	}
	standIn := bytesPrefix(nil, placeholderLen, flexible) // kmsg's prefix before each stand-in
	next := 0                                             // stand-ins below next are behind us
	for {
		j := bytes.Index(frame[at:], s.nonce[:])
		if j < 0 {
			break
		}
		pos := at + j
		if pos+placeholderLen > len(frame) {
			return nil, fmt.Errorf("wire: splice: stand-in cut off at byte %d", pos)
		}
		i := int(binary.BigEndian.Uint32(frame[pos+16:]))
		if i < next || i >= len(s.ranges) {
			return nil, fmt.Errorf("wire: splice: stand-in %d at byte %d out of order (next is %d of %d)", i, pos, next, len(s.ranges))
		}
		if pos-oldPrefix < at || !bytes.Equal(frame[pos-oldPrefix:pos], standIn) {
			return nil, fmt.Errorf("wire: splice: stand-in %d at byte %d is not behind a %d byte length prefix", i, pos, placeholderLen)
		}
		next = i + 1
		var n int64
		for _, r := range s.ranges[i] {
			n += r.Size
		}
		if n > 1<<31-1 {
			return nil, fmt.Errorf("wire: splice: %d bytes in one field", n)
		}
		pieces = append(pieces, Piece{Bytes: frame[at : pos-oldPrefix]})
		p0 := len(prefixes)
		prefixes = bytesPrefix(prefixes, n, flexible)
		pieces = append(pieces, Piece{Bytes: prefixes[p0:]})
		for _, r := range s.ranges[i] {
			if r.Size > 0 {
				pieces = append(pieces, Piece{FileRange: r})
			}
		}
		size += int64(len(prefixes)-p0-oldPrefix) + n - placeholderLen
		at = pos + placeholderLen
	}
	if size > 1<<31-1 {
		return nil, fmt.Errorf("wire: splice: %d byte frame", size)
	}
	binary.BigEndian.PutUint32(prefixes[:4], uint32(size))
	pieces = append(pieces, Piece{Bytes: frame[at:]})
	return pieces, nil
}

// bytesPrefix appends the length prefix kmsg writes before a non-null
// nullable bytes field of n bytes (kbin: int32, or compact uvarint n+1).
func bytesPrefix(dst []byte, n int64, flexible bool) []byte {
	if flexible {
		return kbin.AppendUvarint(dst, uint32(n+1))
	}
	return kbin.AppendInt32(dst, int32(n))
}
