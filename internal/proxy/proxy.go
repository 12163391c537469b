package proxy

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kawa-broker/kawa/internal/wire"
)

// Action is what a rule decides for one frame. The zero Action forwards it.
// The steps run in this order: wait for Hold to close, wait Delay, then Cut
// or Drop or forward.
type Action struct {
	// Hold, when non-nil, keeps the frame (and every frame behind it in
	// the same direction of the connection) until the channel is closed.
	Hold <-chan struct{}
	// Delay forwards the frame this much later.
	Delay time.Duration
	// Drop swallows the frame: the other side never sees it.
	Drop bool
	// Cut closes the client connection and its upstream connection; the
	// frame is not forwarded.
	Cut bool
}

// Rule decides the Action for one frame. It runs on the connection's
// goroutine for that direction and must not block.
type Rule func(Frame) Action

// Proxy forwards TCP connections from its own address to one Kafka broker.
type Proxy struct {
	target string
	ln     net.Listener
	host   string
	port   int32

	onRequest  atomic.Pointer[Rule]
	onResponse atomic.Pointer[Rule]

	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[*pair]struct{}
	nextID atomic.Uint64
}

// New starts a proxy on 127.0.0.1:0 in front of target (host:port). Stop it
// with Close.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	p := &Proxy{
		target: target, ln: ln, host: host, port: int32(port),
		done: make(chan struct{}), conns: map[*pair]struct{}{},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listen address (host:port), to use as the seed broker.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// OnRequest installs the rule for client-to-broker frames (nil: forward
// all). It applies to frames read after the call, on every connection.
func (p *Proxy) OnRequest(r Rule) { p.onRequest.Store(&r) }

// OnResponse installs the rule for broker-to-client frames (nil: forward
// all).
func (p *Proxy) OnResponse(r Rule) { p.onResponse.Store(&r) }

// CutAll closes every open connection pair now; clients reconnect through
// the proxy.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.close()
	}
}

// Close stops accepting, closes every connection, releases holds and waits
// for the proxy's goroutines. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return nil
	default:
	}
	close(p.done)
	err := p.ln.Close()
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		upstream, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &pair{p: p, id: p.nextID.Add(1), client: client, upstream: upstream, pending: map[int32]reqInfo{}}
		p.mu.Lock()
		select {
		case <-p.done:
			p.mu.Unlock()
			c.close()
			return
		default:
		}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go c.requests()
		go c.responses()
	}
}

func (p *Proxy) rule(ptr *atomic.Pointer[Rule]) Rule {
	if r := ptr.Load(); r != nil && *r != nil {
		return *r
	}
	return nil
}

// apply runs the rule's waits and reports whether to forward the frame;
// false means dropped, or cut (the pair is closed), or the proxy closed.
func (c *pair) apply(a Action) bool {
	if a.Hold != nil {
		select {
		case <-a.Hold:
		case <-c.p.done:
			return false
		}
	}
	if a.Delay > 0 {
		t := time.NewTimer(a.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.p.done:
			return false
		}
	}
	if a.Cut {
		c.close()
		return false
	}
	return !a.Drop
}

// reqInfo is what a response needs from its request.
type reqInfo struct{ key, version int16 }

// pair is one client connection and its upstream connection.
type pair struct {
	p                *Proxy
	id               uint64
	client, upstream net.Conn
	closeOnce        sync.Once

	// pending maps correlation ID to request until answered or dropped.
	// NB: requests that get no answer (acks=0 Produce) stay until the
	// connection closes; a test connection sends few enough.
	mu      sync.Mutex
	pending map[int32]reqInfo
}

func (c *pair) close() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.upstream.Close()
	})
}

// finish closes the pair and forgets it; each direction calls it once.
func (c *pair) finish() {
	c.close()
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	c.p.wg.Done()
}

// requests forwards client frames upstream.
func (c *pair) requests() {
	defer c.finish()
	for {
		b, err := wire.ReadFrame(c.client, maxFrame)
		if err != nil {
			return
		}
		h, err := wire.ParseRequestKey(b)
		if err != nil {
			return
		}
		key, version, corr := h.Key, h.Version, h.CorrelationID
		c.mu.Lock()
		c.pending[corr] = reqInfo{key, version}
		c.mu.Unlock()
		if r := c.p.rule(&c.p.onRequest); r != nil {
			if !c.apply(r(Frame{Conn: c.id, Key: key, Version: version, Corr: corr})) {
				c.mu.Lock()
				delete(c.pending, corr) // no response will come
				c.mu.Unlock()
				continue
			}
		}
		if err := writeFrame(c.upstream, b); err != nil {
			return
		}
	}
}

// responses forwards upstream frames to the client, rewriting broker
// addresses.
func (c *pair) responses() {
	defer c.finish()
	for {
		b, err := wire.ReadFrame(c.upstream, maxFrame)
		if err != nil {
			return
		}
		corr, err := wire.ResponseCorrelationID(b)
		if err != nil {
			return
		}
		c.mu.Lock()
		info, ok := c.pending[corr]
		delete(c.pending, corr)
		c.mu.Unlock()
		if !ok {
			info = reqInfo{-1, -1}
		}
		if ok && rewrites(info.key) {
			if b, err = rewriteAddrs(b, info.key, info.version, c.p.host, c.p.port); err != nil {
				return
			}
		}
		if r := c.p.rule(&c.p.onResponse); r != nil {
			if !c.apply(r(Frame{Conn: c.id, Key: info.key, Version: info.version, Corr: corr})) {
				continue
			}
		}
		if err := writeFrame(c.client, b); err != nil {
			return
		}
	}
}
