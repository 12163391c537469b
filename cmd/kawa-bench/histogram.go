package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// histSubBits sets the precision of histogram: each power-of-two range is
// split into 2^histSubBits equal buckets, so a recorded value is reported
// within 1/128 (< 0.8 %) of itself. Values below 2^histSubBits are exact.
const (
	histSubBits  = 7
	histSub      = 1 << histSubBits
	histBuckets  = (63-histSubBits)*histSub + histSub // up to MaxInt64 (bit length 63)
	histMaxValue = math.MaxInt64
)

// histogram is a log-linear (HDR-style) histogram of non-negative int64
// values, here latencies in nanoseconds. Record is lock-free and safe from
// many goroutines (kgo runs promises on its own goroutines); reads are meant
// for after recording has stopped.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // saturates only after ~584 years of summed ns
	max    atomic.Int64
	min    atomic.Int64 // valid when n > 0; starts at math.MaxInt64
}

func newHistogram() *histogram {
	h := &histogram{}
	h.min.Store(histMaxValue)
	return h
}

// histIndex maps v >= 0 to its bucket: exact below histSub, then histSub
// buckets per power of two.
func histIndex(v int64) int {
	u := uint64(v)
	if u < histSub {
		return int(u)
	}
	shift := bits.Len64(u) - 1 - histSubBits
	return shift<<histSubBits + int(u>>shift)
}

// histBounds returns the lowest and highest value that map to bucket i.
func histBounds(i int) (lo, hi int64) {
	if i < histSub {
		return int64(i), int64(i)
	}
	shift := i>>histSubBits - 1
	lo = int64(i-shift<<histSubBits) << shift
	return lo, lo + (int64(1)<<shift - 1)
}

// Record adds one value; negative values count as 0.
func (h *histogram) Record(v int64) {
	v = max(v, 0)
	h.counts[histIndex(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(uint64(v))
	for cur := h.max.Load(); v > cur && !h.max.CompareAndSwap(cur, v); cur = h.max.Load() {
	}
	for cur := h.min.Load(); v < cur && !h.min.CompareAndSwap(cur, v); cur = h.min.Load() {
	}
}

// RecordDuration records d in nanoseconds.
func (h *histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds o's counts to h.
func (h *histogram) Merge(o *histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c > 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); m < h.min.Load() {
		h.min.Store(m)
	}
}

// Count is the number of recorded values.
func (h *histogram) Count() uint64 { return h.n.Load() }

// Max is the largest recorded value (0 when empty).
func (h *histogram) Max() int64 { return h.max.Load() }

// Mean is the exact arithmetic mean (0 when empty).
func (h *histogram) Mean() float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n)
}

// Quantile returns the value at quantile q in [0, 1]: the highest value of
// the bucket holding the ceil(q*n)-th smallest value, clamped to the recorded
// min and max. It returns 0 when empty.
func (h *histogram) Quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(min(max(q, 0), 1) * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := histBounds(i)
			return min(max(hi, h.min.Load()), h.max.Load())
		}
	}
	return h.max.Load()
}
