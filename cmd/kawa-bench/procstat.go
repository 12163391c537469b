package main

import "github.com/kawa-broker/kawa/cmd/internal/procstat"

// brokerUsage is the broker process's resource use over a measurement window.
// CPU is split into user and system time (bench-protocol.md: system time of
// a writer on these VMs is mostly page-cache first touch, so systems are
// compared on user CPU per GiB with system CPU beside it).
type brokerUsage struct {
	PID          int     `json:"pid"`
	CPUSeconds   float64 `json:"cpu_s"`
	UserSeconds  float64 `json:"user_cpu_s"`
	SysSeconds   float64 `json:"sys_cpu_s"`
	CPUPerGiB    float64 `json:"cpu_s_per_gib,omitempty"`
	UserPerGiB   float64 `json:"user_cpu_s_per_gib,omitempty"`
	SysPerGiB    float64 `json:"sys_cpu_s_per_gib,omitempty"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// brokerSampler reads a broker's CPU at the window start and its CPU and
// peak RSS at the end. A zero pid disables it.
type brokerSampler struct {
	pid       int
	userStart float64
	sysStart  float64
}

func (s *brokerSampler) start() error {
	if s.pid == 0 {
		return nil
	}
	u, sy, err := procstat.CPUTimes(s.pid)
	s.userStart, s.sysStart = u, sy
	return err
}

// stop returns the usage since start, with CPU-s per GiB of bytesMoved.
func (s *brokerSampler) stop(bytesMoved int64) (*brokerUsage, error) {
	if s.pid == 0 {
		return nil, nil
	}
	user, sys, err := procstat.CPUTimes(s.pid)
	if err != nil {
		return nil, err
	}
	rss, err := procstat.PeakRSS(s.pid)
	if err != nil {
		return nil, err
	}
	u := &brokerUsage{
		PID:          s.pid,
		UserSeconds:  roundTo(user-s.userStart, 3),
		SysSeconds:   roundTo(sys-s.sysStart, 3),
		PeakRSSBytes: rss,
	}
	u.CPUSeconds = roundTo(u.UserSeconds+u.SysSeconds, 3)
	u.setPerGiB(bytesMoved)
	return u, nil
}

// setPerGiB fills the per-GiB figures for bytesMoved (none when zero).
func (u *brokerUsage) setPerGiB(bytesMoved int64) {
	if u == nil || bytesMoved <= 0 {
		return
	}
	gib := float64(bytesMoved) / (1 << 30)
	u.CPUPerGiB = roundTo(u.CPUSeconds/gib, 3)
	u.UserPerGiB = roundTo(u.UserSeconds/gib, 3)
	u.SysPerGiB = roundTo(u.SysSeconds/gib, 3)
}
