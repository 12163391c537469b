package raftnet

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseVoters parses static raft voters in KRaft's controller.quorum.voters form, the form of
// `kawa serve --peers`: "1@host1:9093,2@host2:9093,3@[::1]:9093", each entry a node ID (a positive integer),
// '@', and the host:port of that node's raft listener. It returns node ID → host:port (Config.Peers). Errors
// name the entry: an empty list or entry, a missing '@', a bad ID, host or port (1-65535), a node ID or an
// address given twice.
func ParseVoters(s string) (map[uint64]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("voters: empty list, want id@host:port[,id@host:port...]")
	}
	out := map[uint64]string{}
	byAddr := map[string]uint64{}
	for entry := range strings.SplitSeq(s, ",") {
		e := strings.TrimSpace(entry)
		idStr, addr, ok := strings.Cut(e, "@")
		if !ok {
			return nil, fmt.Errorf("voters: %q: want id@host:port", e)
		}
		id, err := strconv.ParseUint(idStr, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("voters: %q: node ID %q is not a positive integer", e, idStr)
		}
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("voters: %q: address %q: %v", e, addr, err)
		}
		if host == "" {
			return nil, fmt.Errorf("voters: %q: address %q has no host", e, addr)
		}
		if port, err := strconv.ParseUint(portStr, 10, 16); err != nil || port == 0 {
			return nil, fmt.Errorf("voters: %q: port %q is not in 1-65535", e, portStr)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("voters: node ID %d given twice", id)
		}
		if other, dup := byAddr[addr]; dup {
			return nil, fmt.Errorf("voters: nodes %d and %d both at %s", other, id, addr)
		}
		out[id], byAddr[addr] = addr, id
	}
	return out, nil
}
