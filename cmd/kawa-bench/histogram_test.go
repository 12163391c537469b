package main

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestHistBuckets: every value lies in its bucket's bounds, buckets tile the
// number line without gaps, and a bucket is at most 1/128 of its low bound.
func TestHistBuckets(t *testing.T) {
	t.Parallel()
	check := func(v int64) {
		i := histIndex(v)
		lo, hi := histBounds(i)
		if v < lo || v > hi {
			t.Fatalf("value %d in bucket %d [%d, %d]", v, i, lo, hi)
		}
		if width := hi - lo + 1; width > 1 && width > lo/histSub {
			t.Fatalf("bucket %d [%d, %d] wider than 1/%d of %d", i, lo, hi, histSub, lo)
		}
	}
	prevHi := int64(-1)
	for i := 0; i < histIndex(1<<20); i++ {
		lo, hi := histBounds(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		prevHi = hi
	}
	for v := int64(0); v < 1<<17; v++ {
		check(v)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		check(r.Int64())
	}
	check(1<<63 - 1)
	if got := histIndex(1<<63 - 1); got != histBuckets-1 {
		t.Errorf("max value in bucket %d, want %d", got, histBuckets-1)
	}
}

// TestHistQuantiles pins quantiles of 1..10000: each is the highest value of
// the bucket holding the exact answer, clamped to the recorded range.
func TestHistQuantiles(t *testing.T) {
	t.Parallel()
	h := newHistogram()
	for v := int64(1); v <= 10000; v++ {
		h.Record(v)
	}
	tests := []struct {
		q    float64
		want int64
	}{
		{0, 1},         // rank 1: bucket [1, 1]
		{0.01, 100},    // rank 100: exact below 128
		{0.5, 5023},    // rank 5000: bucket [4992, 5023] (width 32)
		{0.99, 9919},   // rank 9900: bucket [9856, 9919] (width 64)
		{0.999, 10000}, // rank 9990: bucket [9984, 10047], clamped to max
		{1, 10000},
	}
	for _, tt := range tests {
		if got := h.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %d, want %d", tt.q, got, tt.want)
		}
	}
	if h.Count() != 10000 || h.Max() != 10000 || h.Mean() != 5000.5 {
		t.Errorf("count %d max %d mean %v", h.Count(), h.Max(), h.Mean())
	}
	empty := newHistogram()
	if empty.Quantile(0.5) != 0 || empty.Max() != 0 || empty.Mean() != 0 {
		t.Error("empty histogram reports non-zero")
	}
}

// TestHistMergeConcurrent: recording from many goroutines into parts and
// merging equals recording everything into one histogram.
func TestHistMergeConcurrent(t *testing.T) {
	t.Parallel()
	all, merged := newHistogram(), newHistogram()
	parts := make([]*histogram, 4)
	var wg sync.WaitGroup
	for p := range parts {
		parts[p] = newHistogram()
		wg.Go(func() {
			for v := int64(p); v < 40000; v += 4 {
				parts[p].Record(v * 1000)
			}
		})
	}
	for v := int64(0); v < 40000; v++ {
		all.Record(v * 1000)
	}
	wg.Wait()
	for _, p := range parts {
		merged.Merge(p)
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		if a, m := all.Quantile(q), merged.Quantile(q); a != m {
			t.Errorf("q %v: one histogram %d, merged %d", q, a, m)
		}
	}
	if all.Count() != merged.Count() || all.Mean() != merged.Mean() || all.Max() != merged.Max() {
		t.Errorf("count/mean/max differ: %d %v %d vs %d %v %d", all.Count(), all.Mean(), all.Max(), merged.Count(), merged.Mean(), merged.Max())
	}
	h := newHistogram()
	h.Record(-5)
	if h.Quantile(0.5) != 0 || h.Max() != 0 {
		t.Error("negative value not recorded as 0")
	}
}
