// Package server is Kawa's TCP edge: it accepts connections, reads Kafka
// frames, hands decoded requests to a Handler and writes responses back in
// request order.
//
// Goroutines and ownership: Serve runs the accept loop. Each connection has
// one reader goroutine and one writer goroutine. The reader owns the socket's
// read side; it decodes a frame and calls Handler.Handle synchronously, which
// does the part of the request whose effects must be ordered (for Produce, the
// append) and returns a Reply. Replies go into a bounded queue (MaxInFlight)
// and the writer, which owns the socket's write side, runs each Reply in order
// (where blocking waits happen: fsync, long-poll fetch, group joins) and writes
// its response. So a connection pipelines many requests, and its responses
// leave in the order the requests arrived, as Kafka clients require.
package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/wire"
)

// Reply completes a request: it may block (fsync, long poll) and returns the
// response to send, or nil to send nothing (acks=0 Produce). A non-nil error
// closes the connection.
type Reply = func() (kmsg.Response, error)

// Handler answers requests. Handle runs on the connection's reader goroutine
// and must not block for long; blocking belongs in the returned Reply.
type Handler interface {
	Handle(ctx context.Context, h wire.Header, req kmsg.Request) Reply
	// Supports reports whether the handler implements key at version.
	Supports(key, version int16) bool
	// Unsupported answers an ApiVersions request whose version the broker
	// cannot parse: an ApiVersions v0 response with UNSUPPORTED_VERSION and
	// the supported ranges (protocol guide, "Retrieving Supported API versions").
	Unsupported(h wire.Header) kmsg.Response
}

// Conn describes one client connection to handlers.
type Conn struct {
	Remote net.Addr
	ID     uint64
}

// Config configures a Server.
type Config struct {
	MaxRequestBytes int32 // frames declaring more close the connection
	MaxInFlight     int   // requests read ahead of their responses
	// MaxIdle closes a connection that sends no complete request for this
	// long (Kafka's connections.max.idle.ms, default 10 minutes).
	MaxIdle time.Duration
	Logger  *slog.Logger
	// OnPanic, if set, is called when a handler panics (for a metric).
	OnPanic func()
}

// Server serves Kafka connections.
type Server struct {
	cfg     Config
	h       Handler
	log     *slog.Logger
	mu      sync.Mutex
	ln      net.Listener
	conns   map[*conn]struct{}
	closing bool
	wg      sync.WaitGroup
	nextID  atomic.Uint64
}

// New returns a server handing requests to h.
func New(cfg Config, h Handler) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = 10 * time.Minute
	}
	return &Server{cfg: cfg, h: h, log: cfg.Logger, conns: map[*conn]struct{}{}}
}

// Serve accepts connections on ln until Shutdown. It returns nil after
// Shutdown, or the accept error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.New("server: shut down")
	}
	s.ln = ln
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return fmt.Errorf("server: accept: %w", err)
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c := &conn{
			s:     s,
			nc:    nc,
			info:  &Conn{Remote: nc.RemoteAddr(), ID: s.nextID.Add(1)},
			queue: make(chan pending, s.cfg.MaxInFlight),
		}
		c.ctx, c.cancel = context.WithCancel(wire.WithClientAddr(context.Background(), nc.RemoteAddr().String()))
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.cancel()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(2)
		s.mu.Unlock()
		go c.readLoop()
		go c.writeLoop()
	}
}

// Shutdown stops accepting, stops reading new requests, lets every request
// already read finish and be answered, then closes the connections. It returns
// when all connection goroutines have exited or ctx ends (then connections are
// closed forcibly).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

type pending struct {
	h     wire.Header
	reply Reply
}

type conn struct {
	s     *Server
	nc    net.Conn
	info  *Conn
	queue chan pending // reader -> writer, in request order
	// ctx is handed to handlers; cancelled when the writer exits, so replies
	// already read still complete during a graceful shutdown.
	ctx    context.Context
	cancel context.CancelFunc

	stopOnce sync.Once
	stopped  atomic.Bool
}

func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		c.stopped.Store(true)
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) remove() {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
}

// readLoop owns reads. It ends on EOF, a bad frame, or shutdown, and then
// closes the queue so the writer drains what was read and exits.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer close(c.queue)
	// Long polls end when reading ends (EOF, error or shutdown); replies
	// already queued still complete.
	pollDone := make(chan struct{})
	defer close(pollDone)
	ctx := wire.WithPollDone(c.ctx, pollDone)
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		// Idle limit for the next request; checked against stopped after
		// setting it so a concurrent shutdown's deadline is never overwritten.
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.MaxIdle))
		if c.stopped.Load() {
			return
		}
		frame, err := wire.ReadFrame(r, c.s.cfg.MaxRequestBytes)
		if err != nil {
			c.logReadEnd(err)
			return
		}
		h, req, err := wire.ParseRequest(frame)
		var reply Reply
		switch {
		case h.Key == kmsg.ApiVersions.Int16() && (errors.Is(err, wire.ErrUnsupportedVersion) || (err == nil && !c.s.h.Supports(h.Key, h.Version))):
			resp := c.s.h.Unsupported(h)
			h.Version = 0 // answered with ApiVersions v0, as the protocol guide says
			reply = func() (kmsg.Response, error) { return resp, nil }
		case err != nil:
			c.s.log.Warn("closing connection: bad request", "remote", c.info.Remote, "key", h.Key, "version", h.Version, "err", err)
			return
		default:
			reply = c.handle(ctx, h, req)
			if reply == nil {
				return
			}
		}
		c.queue <- pending{h: h, reply: reply}
	}
}

func (c *conn) logReadEnd(err error) {
	switch {
	case errors.Is(err, io.EOF), c.stopped.Load():
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.s.log.Debug("closing idle connection", "remote", c.info.Remote, "idle", c.s.cfg.MaxIdle)
	case errors.Is(err, wire.ErrFrameTooLarge):
		c.s.log.Warn("closing connection: request larger than max-request-bytes", "remote", c.info.Remote, "max", c.s.cfg.MaxRequestBytes, "err", err)
	default:
		c.s.log.Debug("connection read ended", "remote", c.info.Remote, "err", err)
	}
}

// handle runs the synchronous part of a request, turning a panic into a
// closed connection.
func (c *conn) handle(ctx context.Context, h wire.Header, req kmsg.Request) (r Reply) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked(h, p)
			r = nil
		}
	}()
	r = c.s.h.Handle(ctx, h, req)
	if r == nil {
		r = func() (kmsg.Response, error) { return nil, nil }
	}
	return r
}

func (c *conn) panicked(h wire.Header, p any) {
	c.s.log.Error("handler panic; closing connection", "key", h.Key, "version", h.Version, "panic", p, "stack", string(debug.Stack()))
	if c.s.cfg.OnPanic != nil {
		c.s.cfg.OnPanic()
	}
}

// writeLoop owns writes: it completes replies in order and writes them.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	defer c.remove()
	defer c.nc.Close()
	defer c.cancel()
	w := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	broken := false
	for p := range c.queue {
		if broken {
			continue // drain so the reader never blocks
		}
		resp, err := c.complete(p)
		if err != nil {
			c.s.log.Warn("closing connection", "remote", c.info.Remote, "key", p.h.Key, "err", err)
			broken = true
			c.stopReading()
			continue
		}
		if resp != nil {
			buf = wire.AppendResponse(buf[:0], p.h, resp)
			if _, err := w.Write(buf); err != nil {
				broken = true
				c.stopReading()
				continue
			}
		}
		if len(c.queue) == 0 {
			if err := w.Flush(); err != nil {
				broken = true
				c.stopReading()
			}
		}
	}
	_ = w.Flush()
}

func (c *conn) complete(p pending) (resp kmsg.Response, err error) {
	defer func() {
		if x := recover(); x != nil {
			c.panicked(p.h, x)
			resp, err = nil, fmt.Errorf("handler panic: %v", x)
		}
	}()
	return p.reply()
}
