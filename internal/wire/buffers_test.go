package wire

import "testing"

func TestGetBufferSizes(t *testing.T) {
	for _, tc := range []struct{ n, wantCap int }{
		{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20},
		{16 << 20, 16 << 20}, {16<<20 + 1, 16<<20 + 1}, // above the largest class: a plain allocation
	} {
		b := GetBuffer(tc.n)
		if len(b) != tc.n || cap(b) != tc.wantCap {
			t.Errorf("GetBuffer(%d): len %d cap %d, want len %d cap %d", tc.n, len(b), cap(b), tc.n, tc.wantCap)
		}
	}
}

// A buffer grown by append (capacity not a power of two) is filed under the
// largest class it can serve, so a later GetBuffer never gets a short one.
func TestPutBufferFilesGrownBufferUnderItsFloorClass(t *testing.T) {
	grown := make([]byte, 0, 12_000) // between 8 KiB and 16 KiB
	PutBuffer(grown)
	for range 3 { // sync.Pool may drop entries; whatever comes back must fit
		if b := GetBuffer(8192); len(b) != 8192 || cap(b) < 8192 {
			t.Fatalf("GetBuffer(8192) after PutBuffer(cap 12000): len %d cap %d", len(b), cap(b))
		}
		if b := GetBuffer(8193); cap(b) < 8193 {
			t.Fatalf("GetBuffer(8193): cap %d", cap(b))
		}
	}
	PutBuffer(make([]byte, 100)) // below the smallest class: ignored
	PutBuffer(make([]byte, 0, 32<<20))
}
