package server

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kawa-broker/kawa/internal/wire"
)

// errShortFile is a file range that ends before its size: its segment file is shorter than the range the
// handler pinned (which the log never allows), so the frame cannot be completed.
var errShortFile = errors.New("server: file range past the end of its file")

// spliceConn returns nc's raw socket when responses can be sent from files with splice(2): nc is a
// plaintext *net.TCPConn. Otherwise nil.
func spliceConn(nc net.Conn) syscall.RawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// splicePipe is a connection's pipe for splice(2): file pages go into it by reference and from it into the
// socket. It is made on the first spliced response and closed with the connection (writeLoop).
type splicePipe struct {
	r, w int
	size int
}

// pipeBytes is the pipe size asked for (F_SETPIPE_SZ; Linux's default pipe-max-size is 1 MiB): sendfile(2)'s
// internal pipe holds 64 KiB, and every 64 KiB handed to TCP then costs a push of pending frames, which on
// loopback runs the receiver's softirq in the sender (W7 profile with sendfile: 57 % of broker CPU in it, most
// of that tcp_write_xmit and softirqs; 0.37-0.49 CPU-s/GiB against 0.25-0.27 through this 1 MiB pipe and
// 0.61-0.76 copying, 3 alternating reads of 1 GiB each). With 1 MiB a catch-up read's range goes to TCP in
// one or two calls. The pipe holds page references, not copies; it costs the connection two descriptors.
const pipeBytes = 1 << 20

func newSplicePipe() (*splicePipe, error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("server: pipe for splice: %w", err)
	}
	p := &splicePipe{r: fds[0], w: fds[1], size: 64 << 10}
	if n, err := unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, pipeBytes); err == nil {
		p.size = n
	}
	return p, nil
}

func (p *splicePipe) close() {
	_ = syscall.Close(p.r)
	_ = syscall.Close(p.w)
}

// send writes r to the socket dst: splice from the file into the pipe (page references, no copy), then from
// the pipe into the socket, waiting in the runtime's poller while the socket buffer is full. The file offset is
// passed explicitly, so the descriptor's own offset is neither used nor moved. After an error the pipe may hold
// bytes: the caller closes the connection, and the pipe with it.
func (p *splicePipe) send(dst syscall.RawConn, r wire.FileRange) error {
	src, err := r.File.SyscallConn()
	if err != nil {
		return err
	}
	off, left := r.Pos, r.Size
	var serr error
	cerr := src.Control(func(sfd uintptr) {
		inPipe := 0
		werr := dst.Write(func(dfd uintptr) bool {
			for left > 0 || inPipe > 0 {
				if inPipe == 0 {
					n, err := syscall.Splice(int(sfd), &off, p.w, nil, int(min(left, int64(p.size))), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
					switch {
					case errors.Is(err, syscall.EINTR):
						continue
					case err != nil:
						serr = fmt.Errorf("splice %s at %d: %w", r.File.Name(), off, err)
						return true
					case n == 0:
						serr = fmt.Errorf("%w: %s at %d, %d of %d bytes left", errShortFile, r.File.Name(), off, left, r.Size)
						return true
					}
					left -= n
					inPipe = int(n)
				}
				flags := unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
				if left > 0 {
					flags |= unix.SPLICE_F_MORE
				}
				n, err := syscall.Splice(p.r, nil, int(dfd), nil, inPipe, flags)
				if n > 0 {
					inPipe -= int(n)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // wait until the socket is writable
				case errors.Is(err, syscall.EINTR):
				case err != nil:
					serr = fmt.Errorf("splice to socket: %w", err)
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	return errors.Join(cerr, serr)
}
