package verify

import (
	"sync"
	"time"

	"github.com/kawa-broker/kawa/internal/proxy"
)

// slowAPIs are the responses the slow fault delays: the ones a broker can
// only send after a write reached its log (Produce, OffsetCommit,
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// TxnOffsetCommit, and ShareFetch and ShareAcknowledge, whose acquisitions
// and acknowledgements are durable before they are answered), which is
// what a slow disk slows.
var slowAPIs = map[int16]bool{0: true, 8: true, 22: true, 24: true, 25: true, 26: true, 28: true,
	apiShareFetch: true, apiShareAcknowledge: true}

// Proxy is NetFaults over internal/proxy.
type Proxy struct {
	p *proxy.Proxy

	mu    sync.Mutex
	drops map[int16]int // API key → responses still to drop
	delay time.Duration
}

// NewProxy starts a fault proxy in front of target.
func NewProxy(target string) (NetFaults, error) {
	p, err := proxy.New(target)
	if err != nil {
		return nil, err
	}
	x := &Proxy{p: p, drops: map[int16]int{}}
	p.OnResponse(x.rule)
	return x, nil
}

// rule drops (and cuts the connection of) a response owed a drop, and
// delays write responses while the slow fault is on.
func (x *Proxy) rule(f proxy.Frame) proxy.Action {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.drops[f.Key] > 0 {
		x.drops[f.Key]--
		return proxy.Action{Drop: true, Cut: true}
	}
	if x.delay > 0 && slowAPIs[f.Key] {
		return proxy.Action{Delay: x.delay}
	}
	return proxy.Action{}
}

// Addr implements NetFaults.
func (x *Proxy) Addr() string { return x.p.Addr() }

// DropResponse implements NetFaults.
func (x *Proxy) DropResponse(apiKey int16) {
	x.mu.Lock()
	x.drops[apiKey]++
	x.mu.Unlock()
}

// SetDelay implements NetFaults.
func (x *Proxy) SetDelay(d time.Duration) {
	x.mu.Lock()
	x.delay = d
	x.mu.Unlock()
}

// Close implements NetFaults.
func (x *Proxy) Close() error { return x.p.Close() }
