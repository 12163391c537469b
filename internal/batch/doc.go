// Package batch is a view over Kafka record batch v2 bytes (protocol guide
// "Record Batch", KIP-98): header fields, the CRC-32C, validation of a
// produced batch, the in-place rewrites a leader makes (base offset,
// LogAppendTime) and control (marker) batches. It is the module's one parser
// of the batch header and holds its one CRC-32C table (Checksum): the log's
// recovery and scans, the broker's produce path and the coordinators all
// read batches through it.
//
// The package works on []byte and never does I/O. A batch is stored and
// served exactly as the producer sent it, so most functions read or patch
// the 61-byte header in place; records are decoded (and decompressed) only by
// Validate, Records and ParseControl.
//
// Layout (offsets in bytes; big-endian):
//
//	 0 baseOffset int64           outside the CRC, rewritten by the leader
//	 8 batchLength int32          bytes after this field
//	12 partitionLeaderEpoch int32 outside the CRC, rewritten by the leader
//	16 magic int8                 always 2
//	17 crc uint32                 CRC-32C (Castagnoli) of bytes [21:end]
//	21 attributes int16           codec (bits 0-2), timestamp type (3),
//	                              transactional (4), control (5),
//	                              hasDeleteHorizonMs (6); Kawa internal
//	                              batch (14, raft logs only: NewInternal)
//	23 lastOffsetDelta int32
//	27 baseTimestamp int64
//	35 maxTimestamp int64
//	43 producerId int64
//	51 producerEpoch int16
//	53 baseSequence int32
//	57 recordCount int32
//	61 records (compressed as a whole when the codec is not none)
//
// Errors wrap a kerr error with %w (kerr.CorruptMessage, kerr.InvalidRecord,
// kerr.UnsupportedForMessageFormat), so the broker answers with
// errors.As(err, new(*kerr.Error)). Iterate also wraps io.ErrUnexpectedEOF
// when the input ends inside a batch, which is how log recovery tells a torn
// tail from corruption.
//
// NB: nothing here panics on bytes a client can send. The Set* functions
// patch a header in place and need at least HeaderSize bytes; call them only
// on a batch that passed Validate or ParseHeader.
package batch
