package batch

// Iterate walks b, a concatenation of batches as stored in a segment or
// returned by a fetch, calling fn with each whole batch's header and bytes
// (a sub-slice of b). For each batch it checks that the length covers a
// header and that all its bytes are present, the magic (2) and the CRC-32C;
// it does not decompress or look at records.
//
// validBytes is how many bytes from the start of b are whole valid batches.
// err is nil when b was consumed to its end or fn returned false (then
// validBytes ends after the batch fn saw); otherwise it says why the walk
// stopped at validBytes: it wraps kerr.CorruptMessage (or
// kerr.UnsupportedForMessageFormat for another magic) and, when b ends inside
// a batch (a torn write or a fetch cut short), also io.ErrUnexpectedEOF.
func Iterate(b []byte, fn func(h Header, batch []byte) bool) (validBytes int, err error) {
	for validBytes < len(b) {
		h, err := frame(b[validBytes:])
		if err != nil {
			return validBytes, err
		}
		one := b[validBytes : validBytes+h.Size()]
		validBytes += h.Size()
		if fn != nil && !fn(h, one) {
			break
		}
	}
	return validBytes, nil
}
