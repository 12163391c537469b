package main

import (
	"os"
	"testing"

	"github.com/kawa-broker/kawa/cmd/internal/procstat"
)

// TestBrokerSamplerSelf samples this test process, which is running.
func TestBrokerSamplerSelf(t *testing.T) {
	t.Parallel()
	s := &brokerSampler{pid: os.Getpid()}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	u, err := s.stop(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	if u.PID != os.Getpid() || u.CPUSeconds < 0 || u.PeakRSSBytes < 1<<20 || u.CPUPerGiB != u.CPUSeconds {
		t.Errorf("usage %+v", u)
	}
	if _, err := procstat.CPUSeconds(-1); err == nil {
		t.Error("pid -1 accepted")
	}
	off := &brokerSampler{}
	if err := off.start(); err != nil {
		t.Fatal(err)
	}
	if u, err := off.stop(1); u != nil || err != nil {
		t.Errorf("disabled sampler returned %v, %v", u, err)
	}
}
