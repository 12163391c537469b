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
//
// Resource limits (each one holds against a client that tries to exhaust it):
//   - Memory: the bytes of requests read but not yet answered are reserved,
//     as they arrive, from a broker-wide pool (Kafka's
//     queued.max.request.bytes) and from a per-connection budget; a reader
//     that cannot reserve waits (the connection is muted, as in Kafka) and a
//     frame must arrive whole within RequestReadTimeout, so a peer that
//     declares a large frame and trickles it holds memory for a bounded time.
//   - Connections: max.connections.per.ip (over it, a new connection is
//     closed at once) and max.connections (at it, accepting pauses until a
//     connection ends), as in Kafka (KIP-402); an accept error such as
//     EMFILE is retried with backoff, never fatal.
//   - Idle connections (connections.max.idle.ms) are closed; TCP keepalive
//     finds peers that vanished. Warnings about bad connections are
//     rate-limited so a flood of them cannot flood the log.
package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"

	"github.com/kawa-broker/kawa/internal/auth"
	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/invariants"
	"github.com/kawa-broker/kawa/internal/wire"
)

// Reply completes a request: it may block (fsync, long poll) and returns the
// response to send, or nil to send nothing (acks=0 Produce). A non-nil error
// closes the connection.
type Reply = func() (kmsg.Response, error)

// Encoded is implemented by a response that holds buffers to recycle (a
// Fetch's record batches from wire.GetBuffer): the writer calls
// ResponseEncoded once the response has been copied into its frame, and never
// touches the response afterwards. A response that is never encoded (its
// connection broke) is not told; its buffers go to the GC.
type Encoded interface {
	ResponseEncoded()
}

// Spliced is implemented by a response some of whose bytes live in files (a
// Fetch's record batches, left in the segment files when the request's
// wire.RequestInfo.SendFile was set): FileSplices returns the stand-ins it
// holds (wire.Splices; nil when none). The writer sends those ranges with
// splice(2) on plaintext TCP, or through user space otherwise, and calls
// ResponseEncoded once the whole frame is written (or failed), so the
// response may keep its files open until then.
type Spliced interface {
	Encoded
	FileSplices() *wire.Splices
}

// Handler answers requests. Handle runs on the connection's reader goroutine
// and must not block for long; blocking belongs in the returned Reply.
type Handler interface {
	// Handle's info carries the connection's address and long-poll end; ctx
	// ends when the connection's writer exits.
	Handle(ctx context.Context, info wire.RequestInfo, h wire.Header, req kmsg.Request) Reply
	// Supports reports whether the handler implements key at version.
	Supports(key, version int16) bool
	// Unsupported answers an ApiVersions request whose version the broker
	// cannot parse: an ApiVersions v0 response with UNSUPPORTED_VERSION and
	// the supported ranges (protocol guide, "Retrieving Supported API versions").
	Unsupported(h wire.Header) kmsg.Response
}

// FrameReleaser is implemented by a Handler that is done with some requests'
// bytes when Handle returns. A decoded request's []byte fields (a Produce's
// record batches) alias its frame, which comes from wire.GetBuffer; for a key
// ReleasesFrame reports true, the reader gives the frame back to the pool
// right after Handle returns, and the next request's frame may reuse the
// memory. So for such a key neither Handle's callees nor the Reply it returns
// may keep any []byte of the request (they copy what they need, as the log's
// append does). Frames of other keys are left to the GC. Under -tags
// invariants a released frame is overwritten first, so a handler that broke
// the rule reads garbage in tests instead of another request's bytes in
// production.
type FrameReleaser interface {
	ReleasesFrame(key int16) bool
}

// Conn describes one client connection to handlers.
type Conn struct {
	Remote net.Addr
	ID     uint64
}

// Security protocols of a listener (Kafka's listener.security.protocol.map
// values).
const (
	Plaintext     = "PLAINTEXT"
	SSL           = "SSL"
	SASLPlaintext = "SASL_PLAINTEXT"
	SASLSSL       = "SASL_SSL"
)

// Listener is how one listening socket secures its connections.
type Listener struct {
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL ("" is PLAINTEXT).
	Protocol string
	// TLS is required by SSL and SASL_SSL: at least TLS 1.2 is enforced.
	// ClientAuth set to require or verify client certificates makes the
	// principal User:<certificate subject> on SSL (Kafka's default
	// ssl.principal.mapping.rules: the full RFC 2253 DN).
	TLS *tls.Config
	// SASL is required by SASL_PLAINTEXT and SASL_SSL: before it succeeds
	// only ApiVersions, SaslHandshake (v1) and SaslAuthenticate are served.
	SASL *auth.SASL
	// AdvertisedHost and AdvertisedPort, when set, are what Metadata,
	// FindCoordinator and DescribeCluster tell clients of this listener
	// (Kafka's advertised.listeners), passed to handlers in wire.RequestInfo.
	AdvertisedHost string
	AdvertisedPort int32
}

func (l Listener) usesTLS() bool  { return l.Protocol == SSL || l.Protocol == SASLSSL }
func (l Listener) usesSASL() bool { return l.Protocol == SASLPlaintext || l.Protocol == SASLSSL }

// check validates l and returns it with the TLS floor applied.
func (l Listener) check() (Listener, error) {
	switch l.Protocol {
	case "":
		l.Protocol = Plaintext
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
	default:
		return l, fmt.Errorf("server: unknown security protocol %q (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", l.Protocol)
	}
	if l.usesTLS() {
		if l.TLS == nil {
			return l, fmt.Errorf("server: %s listener without a TLS configuration", l.Protocol)
		}
		l.TLS = l.TLS.Clone()
		l.TLS.MinVersion = max(l.TLS.MinVersion, tls.VersionTLS12)
	}
	if l.usesSASL() && l.SASL == nil {
		return l, fmt.Errorf("server: %s listener without SASL mechanisms", l.Protocol)
	}
	return l, nil
}

// Config configures a Server. Zero values take the defaults given.
type Config struct {
	MaxRequestBytes int32 // frames declaring more close the connection (default 100 MiB)
	MaxInFlight     int   // requests read ahead of their responses (default 100)
	// QueuedMaxRequestBytes caps the bytes of requests read but not yet
	// answered over all connections (Kafka's queued.max.request.bytes);
	// <= 0 is unbounded. Raised to MaxRequestBytes if below it, since one
	// whole request must fit.
	QueuedMaxRequestBytes int64
	// MaxConnQueuedBytes caps the bytes of requests read but not yet answered
	// on one connection; default (and minimum) MaxRequestBytes.
	MaxConnQueuedBytes int64
	// RequestReadTimeout bounds the time from a frame's size prefix to its
	// last byte, waits for request memory included; a connection that takes
	// longer is closed (default 30 s, Kafka clients' request.timeout.ms).
	RequestReadTimeout time.Duration
	// MaxConnections caps open connections (Kafka's max.connections): at the
	// cap the server stops accepting until one closes. <= 0 is unbounded.
	MaxConnections int
	// MaxConnectionsPerIP caps open connections from one client IP (Kafka's
	// max.connections.per.ip): a connection over it is closed at once.
	// <= 0 is unbounded.
	MaxConnectionsPerIP int
	// MaxIdle closes a connection that sends no complete request for this
	// long (Kafka's connections.max.idle.ms, default 10 minutes).
	MaxIdle time.Duration
	Logger  *slog.Logger
	// OnPanic, if set, is called when a handler panics (for a metric).
	OnPanic func()
	// OnAuthentication, if set, is called at the end of each SASL exchange
	// with its mechanism and whether it logged in (for metrics).
	OnAuthentication func(mechanism string, ok bool)
	// ConnectionsMaxReauth is Kafka's connections.max.reauth.ms (KIP-368):
	// a SASL session lasts this long (SaslAuthenticate v1+ tells the client
	// as session_lifetime_ms), the client re-authenticates on the live
	// connection with SaslHandshake and SaslAuthenticate, and a connection
	// whose session ended without that is closed on its next request.
	// 0 (Kafka's default) is no limit and no re-authentication.
	ConnectionsMaxReauth time.Duration
	// OnSessionExpired, if set, is called when a connection is closed for a
	// SASL session that expired without re-authentication (for metrics).
	OnSessionExpired func()
	// Now is the clock of session lifetimes (tests); nil is time.Now.
	Now func() time.Time
	// FailedAuthenticationDelay holds back the answer to a failed SASL
	// authentication (and so the close after it), as Kafka's
	// connection.failed.authentication.delay.ms (default 100 ms in kawa
	// serve; 0 here is none): a password-guessing client is slowed, and the
	// wait runs on that connection's writer, so no other connection waits.
	FailedAuthenticationDelay time.Duration
}

// SASLMaxReceiveBytes bounds a request before SASL authentication succeeds,
// as Kafka's sasl.server.max.receive.size (default 524288): an
// unauthenticated peer cannot make the broker reserve MaxRequestBytes.
const SASLMaxReceiveBytes = 512 << 10

// ConfigFrom returns the server settings of a broker config (after
// config.Broker.WithDefaults), with logger lg.
func ConfigFrom(b config.Broker, lg *slog.Logger) Config {
	return Config{
		MaxRequestBytes:           b.MaxRequestBytes,
		MaxInFlight:               b.MaxInFlight,
		QueuedMaxRequestBytes:     b.QueuedMaxRequestBytes,
		RequestReadTimeout:        b.RequestReadTimeout,
		MaxConnections:            b.MaxConnections,
		MaxConnectionsPerIP:       b.MaxConnectionsPerIP,
		MaxIdle:                   b.ConnectionsMaxIdle,
		ConnectionsMaxReauth:      b.ConnectionsMaxReauth,
		FailedAuthenticationDelay: b.FailedAuthenticationDelay,
		Logger:                    lg,
	}
}

// Server serves Kafka connections.
type Server struct {
	cfg   Config
	h     Handler
	log   *slog.Logger
	warn  warnLimiter
	pool  *semaphore.Weighted // QueuedMaxRequestBytes; nil when unbounded
	slots chan struct{}       // MaxConnections tokens; nil when unbounded
	done  chan struct{}       // closed by Shutdown

	mu      sync.Mutex
	lns     []net.Listener
	conns   map[*conn]struct{}
	perIP   map[string]int
	closing bool
	wg      sync.WaitGroup
	nextID  atomic.Uint64
	queued  atomic.Int64 // bytes reserved by requests read and not yet answered
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
	if cfg.RequestReadTimeout <= 0 {
		cfg.RequestReadTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.MaxConnQueuedBytes = max(cfg.MaxConnQueuedBytes, int64(cfg.MaxRequestBytes))
	s := &Server{cfg: cfg, h: h, log: cfg.Logger, conns: map[*conn]struct{}{}, perIP: map[string]int{}, done: make(chan struct{})}
	s.warn.init(cfg.Logger)
	if cfg.QueuedMaxRequestBytes > 0 {
		s.pool = semaphore.NewWeighted(max(cfg.QueuedMaxRequestBytes, int64(cfg.MaxRequestBytes)))
	}
	if cfg.MaxConnections > 0 {
		s.slots = make(chan struct{}, cfg.MaxConnections)
	}
	return s
}

// QueuedBytes returns the bytes of requests read and not yet answered, over
// all connections (what QueuedMaxRequestBytes caps).
func (s *Server) QueuedBytes() int64 { return s.queued.Load() }

// Serve accepts PLAINTEXT connections on ln until Shutdown. It returns nil
// after Shutdown, or the accept error.
func (s *Server) Serve(ln net.Listener) error { return s.ServeListener(ln, Listener{}) }

// ServeListener accepts connections on ln, secured as l says, until
// Shutdown. A server may serve several listeners at once, one call each. It
// returns nil after Shutdown, or an invalid l or accept error.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	l, err := l.check()
	if err != nil {
		ln.Close()
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.New("server: shut down")
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	var backoff time.Duration
	for {
		if s.slots != nil {
			// max.connections: wait for a free slot before accepting, so new
			// connections wait in the listen backlog (Kafka's acceptor).
			select {
			case s.slots <- struct{}{}:
			case <-s.done:
				return nil
			}
		}
		nc, err := ln.Accept()
		if err != nil {
			s.releaseSlot()
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			if !retryableAccept(err) {
				return fmt.Errorf("server: accept: %w", err)
			}
			// Out of descriptors (EMFILE) and the like: the broker keeps
			// serving the connections it has and retries, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.warn.log("accept failed; retrying", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.done:
				return nil
			}
			continue
		}
		backoff = 0
		s.admit(nc, &l)
	}
}

// retryableAccept reports whether an Accept error is a passing condition
// (descriptor or buffer exhaustion, an aborted handshake, a timeout) rather
// than a closed listener.
func retryableAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Server) releaseSlot() {
	if s.slots != nil {
		<-s.slots
	}
}

// admit starts the goroutines of an accepted connection, or closes it when
// its IP is at max.connections.per.ip or the server is shutting down.
func (s *Server) admit(nc net.Conn, l *Listener) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	ip := remoteIP(nc.RemoteAddr())
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.releaseSlot()
		nc.Close()
		return
	}
	if s.cfg.MaxConnectionsPerIP > 0 && s.perIP[ip] >= s.cfg.MaxConnectionsPerIP {
		s.mu.Unlock()
		s.releaseSlot()
		nc.Close()
		s.warn.log("closing connection: too many connections from this IP (max.connections.per.ip)", "remote", nc.RemoteAddr(), "max", s.cfg.MaxConnectionsPerIP)
		return
	}
	var raw syscall.RawConn
	if l.usesTLS() {
		// The handshake runs on the reader goroutine (readLoop), bounded by
		// RequestReadTimeout, so a slow or garbage peer holds only itself.
		nc = tls.Server(nc, l.TLS)
	} else {
		raw = spliceConn(nc)
	}
	c := &conn{
		s:      s,
		l:      l,
		nc:     nc,
		raw:    raw,
		ip:     ip,
		info:   &Conn{Remote: nc.RemoteAddr(), ID: s.nextID.Add(1)},
		queue:  make(chan pending, s.cfg.MaxInFlight),
		budget: semaphore.NewWeighted(s.cfg.MaxConnQueuedBytes),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.readCtx, c.readCancel = context.WithCancel(context.Background())
	s.conns[c] = struct{}{}
	s.perIP[ip]++
	s.wg.Add(2)
	s.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
}

func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// Shutdown stops accepting, stops reading new requests, lets every request
// already read finish and be answered, then closes the connections. It returns
// when all connection goroutines have exited or ctx ends (then connections are
// closed forcibly).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		close(s.done)
	}
	s.closing = true
	for _, ln := range s.lns {
		ln.Close()
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
	h        wire.Header
	reply    Reply
	reserved int64 // request memory to release once answered
}

type conn struct {
	s     *Server
	l     *Listener
	nc    net.Conn
	ip    string
	info  *Conn
	queue chan pending // reader -> writer, in request order
	// raw is the plaintext TCP socket for splice(2) of Spliced responses;
	// nil on TLS (ranges are copied, to be encrypted).
	raw syscall.RawConn
	// ctx is handed to handlers; cancelled when the writer exits, so replies
	// already read still complete during a graceful shutdown.
	ctx    context.Context
	cancel context.CancelFunc
	// readCtx ends waits for request memory; cancelled by stopReading.
	readCtx    context.Context
	readCancel context.CancelFunc
	budget     *semaphore.Weighted // MaxConnQueuedBytes of this connection

	stopOnce sync.Once
	stopped  atomic.Bool
}

func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		c.stopped.Store(true)
		c.readCancel()
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) remove() {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	if c.s.perIP[c.ip]--; c.s.perIP[c.ip] <= 0 {
		delete(c.s.perIP, c.ip)
	}
	c.s.mu.Unlock()
	c.s.releaseSlot()
}

// reserve takes n bytes of request memory from the connection's budget and
// the broker-wide pool, waiting until ctx ends.
func (c *conn) reserve(ctx context.Context, n int64) error {
	if err := c.budget.Acquire(ctx, n); err != nil {
		return err
	}
	if c.s.pool != nil {
		if err := c.s.pool.Acquire(ctx, n); err != nil {
			c.budget.Release(n)
			return err
		}
	}
	c.s.queued.Add(n)
	return nil
}

// release returns request memory taken by reserve.
func (c *conn) release(n int64) {
	if n == 0 {
		return
	}
	c.s.queued.Add(-n)
	if c.s.pool != nil {
		c.s.pool.Release(n)
	}
	c.budget.Release(n)
}

// errReadTimeout is a frame that did not arrive whole within
// RequestReadTimeout (waits for request memory included).
var errReadTimeout = errors.New("request not received within the request read timeout")

// readFrame reads one frame, reserving its memory as it arrives. It returns
// the frame and the bytes reserved for it (released by the caller once the
// request is answered); on error nothing stays reserved.
// idleDeadline, already set on the socket, still bounds the whole frame.
func (c *conn) readFrame(r *frameReader, idleDeadline time.Time, maxBytes int32) ([]byte, int64, error) {
	n, err := r.readSize(maxBytes)
	if err != nil {
		return nil, 0, err
	}
	deadline := time.Now().Add(c.s.cfg.RequestReadTimeout)
	if idleDeadline.Before(deadline) {
		deadline = idleDeadline
	} else {
		_ = c.nc.SetReadDeadline(deadline)
		if c.stopped.Load() {
			return nil, 0, net.ErrClosed
		}
	}
	ctx, cancel := context.WithDeadline(c.readCtx, deadline)
	defer cancel()
	var reserved int64
	frame, err := r.readBody(n, func(grow int) error {
		if err := c.reserve(ctx, int64(grow)); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return errReadTimeout
			}
			return err
		}
		reserved += int64(grow)
		return nil
	})
	if err != nil {
		c.release(reserved)
		if errors.Is(err, os.ErrDeadlineExceeded) && !c.stopped.Load() {
			err = errReadTimeout
		}
		return nil, 0, err
	}
	return frame, reserved, nil
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
	info := wire.RequestInfo{ClientAddr: c.info.Remote.String(), PollDone: pollDone,
		AdvertisedHost: c.l.AdvertisedHost, AdvertisedPort: c.l.AdvertisedPort, SendFile: c.raw != nil}
	ctx := c.ctx
	principal, ok := c.handshakeTLS()
	if !ok {
		return
	}
	info.Principal = principal
	var sasl saslState
	r := &frameReader{nc: c.nc}
	defer r.release()
	for {
		// Idle limit for the next request; checked against stopped after
		// setting it so a concurrent shutdown's deadline is never overwritten.
		idle := time.Now().Add(c.s.cfg.MaxIdle)
		_ = c.nc.SetReadDeadline(idle)
		if c.stopped.Load() {
			return
		}
		maxBytes := c.s.cfg.MaxRequestBytes
		if c.l.usesSASL() && !sasl.authenticated {
			maxBytes = min(maxBytes, SASLMaxReceiveBytes)
		}
		frame, reserved, err := c.readFrame(r, idle, maxBytes)
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
			c.release(reserved)
			c.s.warn.log("closing connection: bad request", "remote", c.info.Remote, "key", h.Key, "version", h.Version, "err", err)
			return
		case c.l.usesSASL() && sasl.expired(c.s.cfg.Now()) && h.Key != kmsg.SASLHandshake.Int16():
			// KIP-368: a session that ended without re-authentication closes
			// the connection on its next request, as Kafka's
			// KafkaChannel.serverAuthenticationSessionExpired.
			c.release(reserved)
			c.s.warn.log("closing connection: SASL session expired without re-authentication (connections.max.reauth.ms)", "remote", c.info.Remote, "principal", info.Principal, "api", kmsg.NameForKey(h.Key))
			if c.s.cfg.OnSessionExpired != nil {
				c.s.cfg.OnSessionExpired()
			}
			return
		case c.l.usesSASL() && sasl.inExchange(h.Key):
			resp, user, closeAfter := c.saslStep(&sasl, h, req)
			if resp == nil {
				c.release(reserved)
				return
			}
			reply := func() (kmsg.Response, error) { return resp, nil }
			if closeAfter && c.s.cfg.FailedAuthenticationDelay > 0 {
				reply = c.delayed(resp, c.s.cfg.FailedAuthenticationDelay)
			}
			c.queue <- pending{h: h, reply: reply, reserved: reserved}
			if closeAfter {
				return // the writer sends the failure, then closes
			}
			if user != "" {
				info.Principal = "User:" + user
			}
			continue
		default:
			info.ClientID = ""
			if h.ClientID != nil {
				info.ClientID = *h.ClientID
			}
			reply = c.handle(ctx, info, h, req)
			if reply == nil {
				c.release(reserved)
				return
			}
			if fr, ok := c.s.h.(FrameReleaser); ok && fr.ReleasesFrame(h.Key) {
				releaseFrame(frame)
			}
		}
		c.queue <- pending{h: h, reply: reply, reserved: reserved}
	}
}

// releaseFrame gives a handled request's frame back to wire's pool
// (FrameReleaser). Under -tags invariants it is poisoned first.
func releaseFrame(frame []byte) {
	if invariants.Enabled {
		for i := range frame {
			frame[i] = 0xdb
		}
	}
	wire.PutBuffer(frame)
}

// handshakeTLS runs the TLS handshake of a TLS listener's connection within
// RequestReadTimeout and returns the connection's principal before any SASL:
// User:<subject DN> for a verified client certificate, else User:ANONYMOUS.
// On failure (a plaintext client, an untrusted certificate) it logs and
// returns false; only this connection closes.
func (c *conn) handshakeTLS() (string, bool) {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return anonymous, true
	}
	_ = c.nc.SetDeadline(time.Now().Add(c.s.cfg.RequestReadTimeout))
	if c.stopped.Load() {
		return "", false
	}
	if err := tc.Handshake(); err != nil {
		if !c.stopped.Load() {
			c.s.warn.log("closing connection: TLS handshake failed", "remote", c.info.Remote, "err", err)
		}
		return "", false
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	st := tc.ConnectionState()
	if len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		return "User:" + st.PeerCertificates[0].Subject.String(), true
	}
	return anonymous, true
}

// anonymous is the principal of a connection with neither SASL nor a client
// certificate (Kafka's KafkaPrincipal.ANONYMOUS).
const anonymous = "User:ANONYMOUS"

// saslState is a SASL listener connection's progress, owned by the reader.
type saslState struct {
	session       auth.Session // set by a successful SaslHandshake
	mechanism     string
	authenticated bool
	// user is the authenticated user: a re-authentication must keep it.
	user string
	// expires is when the session ends (KIP-368); zero is never.
	expires time.Time
	// reauth is a re-authentication in progress (SaslHandshake received on
	// an authenticated connection whose session has a lifetime).
	reauth bool
}

// expired reports whether an authenticated session's lifetime is over and no
// re-authentication is under way.
func (st *saslState) expired(now time.Time) bool {
	return st.authenticated && !st.reauth && !st.expires.IsZero() && !now.Before(st.expires)
}

// inExchange reports whether a request of key belongs to the SASL exchange
// (the server answers it) rather than to the broker: anything but
// ApiVersions before login, and the handshake and its steps of a
// re-authentication once the session has a lifetime. Without one, a second
// handshake goes to the broker, which answers ILLEGAL_SASL_STATE.
func (st *saslState) inExchange(key int16) bool {
	if !st.authenticated {
		return key != kmsg.ApiVersions.Int16()
	}
	if st.reauth {
		return true
	}
	return key == kmsg.SASLHandshake.Int16() && !st.expires.IsZero()
}

// saslStep answers a request that arrived before SASL succeeded (Kafka's
// SaslServerAuthenticator): SaslHandshake v1 picks the mechanism,
// SaslAuthenticate steps it. It returns the response, the user once
// authenticated, and whether to close after sending it (a failure answers
// SASL_AUTHENTICATION_FAILED, then closes). A nil response closes at once:
// any other API before authentication, as Kafka does.
func (c *conn) saslStep(st *saslState, h wire.Header, req kmsg.Request) (kmsg.Response, string, bool) {
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = c.l.SASL.Mechanisms()
		if r.Version < 1 {
			// v0 means raw tokens outside Kafka framing, which Kawa does not
			// speak; every client in use sends v1 (design-research 2.2).
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return resp, "", true
		}
		if st.authenticated && !st.reauth {
			// KIP-368: the client re-authenticates on the live connection.
			st.reauth, st.session = true, nil
		} else if st.session != nil {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return resp, "", true
		}
		sess, ok := c.l.SASL.Start(r.Mechanism)
		if !ok {
			c.s.warn.log("closing connection: unsupported SASL mechanism", "remote", c.info.Remote, "mechanism", r.Mechanism)
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, "", true
		}
		if st.reauth && r.Mechanism != st.mechanism {
			// As Kafka's ReauthInfo.saslMechanismUnchanged: the handshake is
			// answered, the exchange that follows fails.
			sess = changedMechanism{from: st.mechanism, to: r.Mechanism}
		} else {
			st.mechanism = r.Mechanism
		}
		st.session = sess
		return resp, "", false
	case *kmsg.SASLAuthenticateRequest:
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if st.session == nil {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			msg := "SaslAuthenticate before SaslHandshake"
			resp.ErrorMessage = &msg
			return resp, "", true
		}
		out, done, err := st.session.Step(r.SASLAuthBytes)
		if err == nil && done && st.reauth && st.session.User() != st.user {
			// KIP-368: a re-authentication may not change the principal
			// (Kafka's ReauthInfo.ensurePrincipalUnchanged, whose text this is).
			//lint:ignore ST1005 Kafka's own text, which clients show
			err = fmt.Errorf("Cannot change principals during re-authentication from User:%s: User:%s", st.user, st.session.User())
		}
		if err != nil {
			c.s.warn.log("closing connection: SASL authentication failed", "remote", c.info.Remote, "mechanism", st.mechanism, "reauthentication", st.reauth, "err", err)
			c.authenticated(st.mechanism, false)
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := auth.ClientMessage(err)
			resp.ErrorMessage = &msg
			return resp, "", true
		}
		resp.SASLAuthBytes = out
		if !done {
			return resp, "", false
		}
		st.authenticated, st.reauth, st.user = true, false, st.session.User()
		if life := c.sessionLifetime(st.session); life > 0 {
			// session_lifetime_ms (v1+); a v0 client is not told, and its
			// connection closes when the session ends, as in Kafka.
			st.expires = c.s.cfg.Now().Add(life)
			resp.SessionLifetimeMillis = max(life.Milliseconds(), 1)
		} else {
			st.expires = time.Time{}
		}
		c.authenticated(st.mechanism, true)
		return resp, st.user, false
	}
	c.s.warn.log("closing connection: unexpected Kafka request during SASL handshake", "remote", c.info.Remote, "api", kmsg.NameForKey(h.Key))
	return nil, "", true
}

// delayed is a Reply that answers resp after d, or at once when the
// connection ends first (shutdown).
func (c *conn) delayed(resp kmsg.Response, d time.Duration) Reply {
	return func() (kmsg.Response, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.s.done:
		}
		return resp, nil
	}
}

// sessionLifetime is how long a session that just authenticated lasts, as
// Kafka's SaslServerAuthenticator computes it: connections.max.reauth.ms,
// shortened to the credential's end when it has one (an OAUTHBEARER
// token's exp, enforced even without connections.max.reauth.ms); 0 is
// unlimited.
func (c *conn) sessionLifetime(sess auth.Session) time.Duration {
	life := c.s.cfg.ConnectionsMaxReauth
	if e, ok := sess.(auth.Expiring); ok && !e.Expires().IsZero() {
		left := max(e.Expires().Sub(c.s.cfg.Now()), time.Millisecond)
		if life <= 0 || left < life {
			life = left
		}
	}
	return life
}

// changedMechanism is the exchange of a re-authentication that names another
// mechanism than the login: its first step fails.
type changedMechanism struct{ from, to string }

func (m changedMechanism) Step([]byte) ([]byte, bool, error) {
	return nil, false, fmt.Errorf("SASL mechanism changed during re-authentication from %s to %s", m.from, m.to)
}

func (m changedMechanism) User() string { return "" }

func (c *conn) authenticated(mechanism string, ok bool) {
	if c.s.cfg.OnAuthentication != nil {
		c.s.cfg.OnAuthentication(mechanism, ok)
	}
}

func (c *conn) logReadEnd(err error) {
	switch {
	case errors.Is(err, io.EOF), c.stopped.Load():
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.s.log.Debug("closing idle connection", "remote", c.info.Remote, "idle", c.s.cfg.MaxIdle)
	case errors.Is(err, errReadTimeout):
		c.s.warn.log("closing connection: request not received in time", "remote", c.info.Remote, "timeout", c.s.cfg.RequestReadTimeout)
	case errors.Is(err, wire.ErrFrameTooLarge):
		// err names the declared size and the limit that applied: max-request-bytes, or the smaller
		// one before SASL authentication; a negative size lands here too.
		c.s.warn.log("closing connection: request size out of range", "remote", c.info.Remote, "err", err)
	default:
		c.s.log.Debug("connection read ended", "remote", c.info.Remote, "err", err)
	}
}

// handle runs the synchronous part of a request, turning a panic into a
// closed connection.
func (c *conn) handle(ctx context.Context, info wire.RequestInfo, h wire.Header, req kmsg.Request) (r Reply) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked(h, p)
			r = nil
		}
	}()
	r = c.s.h.Handle(ctx, info, h, req)
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
	rw := &responseWriter{nc: c.nc}
	var pipe *splicePipe // made by the first spliced response (writeSpliced)
	defer func() {
		if pipe != nil {
			pipe.close()
		}
	}()
	broken := false
	for p := range c.queue {
		if broken {
			c.release(p.reserved)
			continue // drain so the reader never blocks
		}
		resp, err := c.complete(p)
		c.release(p.reserved)
		if err != nil {
			c.s.warn.log("closing connection", "remote", c.info.Remote, "key", p.h.Key, "err", err)
			broken = true
			c.stopReading()
			continue
		}
		if resp != nil {
			buf := wire.AppendResponse(rw.frameBuf(), p.h, resp)
			var err error
			if sp, ok := resp.(Spliced); ok && sp.FileSplices().Len() > 0 {
				err = c.writeSpliced(rw.writer(), &pipe, buf, resp.IsFlexible(), sp)
			} else {
				if e, ok := resp.(Encoded); ok {
					e.ResponseEncoded()
				}
				_, err = rw.writer().Write(buf)
			}
			rw.encoded(buf)
			if err != nil {
				broken = true
				c.stopReading()
				continue
			}
		}
		if len(c.queue) == 0 {
			// Nothing more to send for now: the buffers go back to the pools
			// until the next response.
			if err := rw.flush(); err != nil {
				broken = true
				c.stopReading()
			}
		}
	}
	_ = rw.flush()
}

// writeSpliced writes the frame that frame (sp encoded with its stand-ins)
// stands for, then lets sp release its files. A frame that cannot be spliced
// is not sent at all: the connection closes (a handler bug, logged), since a
// client cannot skip a broken frame.
func (c *conn) writeSpliced(w *bufio.Writer, pipe **splicePipe, frame []byte, flexible bool, sp Spliced) error {
	defer sp.ResponseEncoded()
	pieces, err := sp.FileSplices().Splice(frame, flexible)
	if err != nil {
		c.s.warn.log("closing connection: response not sent", "remote", c.info.Remote, "err", err)
		return err
	}
	for _, p := range pieces {
		if p.File == nil {
			if _, err := w.Write(p.Bytes); err != nil {
				return err
			}
			continue
		}
		if c.raw != nil && *pipe == nil {
			// Out of descriptors for a pipe: this range is copied, the next one tries again.
			*pipe, _ = newSplicePipe()
		}
		if c.raw == nil || *pipe == nil {
			n, err := io.Copy(w, io.NewSectionReader(p.File, p.Pos, p.Size))
			if err == nil && n < p.Size {
				err = fmt.Errorf("%w: %s ends %d bytes into a %d byte range at %d", errShortFile, p.File.Name(), n, p.Size, p.Pos)
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if err := (*pipe).send(c.raw, p.FileRange); err != nil {
			// Part of the frame may be on the wire: the connection cannot go on.
			if errors.Is(err, errShortFile) {
				c.s.warn.log("closing connection: response not sent whole", "remote", c.info.Remote, "err", err)
			}
			return err
		}
	}
	return nil
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
