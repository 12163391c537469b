package delivery

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Provenance headers added to a dead-lettered record, after the source
// record's own headers (its key, value, headers and timestamp are kept).
// Times are RFC 3339 with nanoseconds, UTC.
const (
	HeaderDLTTopic        = "kawa-dlt-topic"         // source topic
	HeaderDLTPartition    = "kawa-dlt-partition"     // source partition, decimal
	HeaderDLTOffset       = "kawa-dlt-offset"        // source offset, decimal
	HeaderDLTAttempts     = "kawa-dlt-attempts"      // handler attempts made, decimal
	HeaderDLTError        = "kawa-dlt-error"         // the last attempt's error text
	HeaderDLTFirstFailure = "kawa-dlt-first-failure" // time of the first failed attempt
	HeaderDLTLastFailure  = "kawa-dlt-last-failure"  // time of the last failed attempt
	HeaderDLTScope        = "kawa-dlt-scope"         // Config.Scope of the loop that gave up
)

// provenance is the source record copied, with the provenance headers, bound
// for topic at the source partition's number.
func provenance(r *kgo.Record, topic, scope string, extra ...kgo.RecordHeader) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+8+len(extra))
	hs = append(hs, r.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderDLTTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLTPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: HeaderDLTOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: HeaderDLTScope, Value: []byte(scope)},
	)
	hs = append(hs, extra...)
	return &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}
}

func stamp(t time.Time) []byte { return []byte(t.UTC().Format(time.RFC3339Nano)) }

// deadLetter writes r to its dead-letter topic and waits for the acks=all
// acknowledgement; only then may r's offset be committed past.
func (a *alo) deadLetter(ctx context.Context, r *kgo.Record, o outcome) error {
	dlt := a.opts.DeadLetterTopic(r.Topic)
	rec := provenance(r, dlt, a.Scope,
		kgo.RecordHeader{Key: HeaderDLTAttempts, Value: []byte(strconv.Itoa(o.attempts))},
		kgo.RecordHeader{Key: HeaderDLTError, Value: []byte(o.err.Error())},
		kgo.RecordHeader{Key: HeaderDLTFirstFailure, Value: stamp(o.first)},
		kgo.RecordHeader{Key: HeaderDLTLastFailure, Value: stamp(o.last)},
	)
	if err := a.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s/%d@%d to %s: %w (record's last error: %v)",
			errDeadLetter, r.Topic, r.Partition, r.Offset, dlt, err, o.err)
	}
	a.hooks.OnDeadLettered(r, dlt, o.attempts, o.err)
	return nil
}
