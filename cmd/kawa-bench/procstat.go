package main

import "github.com/kawa-broker/kawa/cmd/internal/procstat"

// brokerUsage is the broker process's resource use over a measurement window.
type brokerUsage struct {
	PID          int     `json:"pid"`
	CPUSeconds   float64 `json:"cpu_s"`
	CPUPerGiB    float64 `json:"cpu_s_per_gib,omitempty"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// brokerSampler reads a broker's CPU at the window start and its CPU and
// peak RSS at the end. A zero pid disables it.
type brokerSampler struct {
	pid      int
	cpuStart float64
}

func (s *brokerSampler) start() error {
	if s.pid == 0 {
		return nil
	}
	c, err := procstat.CPUSeconds(s.pid)
	s.cpuStart = c
	return err
}

// stop returns the usage since start, with CPU-s per GiB of bytesMoved.
func (s *brokerSampler) stop(bytesMoved int64) (*brokerUsage, error) {
	if s.pid == 0 {
		return nil, nil
	}
	c, err := procstat.CPUSeconds(s.pid)
	if err != nil {
		return nil, err
	}
	rss, err := procstat.PeakRSS(s.pid)
	if err != nil {
		return nil, err
	}
	u := &brokerUsage{PID: s.pid, CPUSeconds: roundTo(c-s.cpuStart, 3), PeakRSSBytes: rss}
	if bytesMoved > 0 {
		u.CPUPerGiB = u.CPUSeconds / (float64(bytesMoved) / (1 << 30))
	}
	return u, nil
}
