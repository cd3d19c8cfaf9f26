package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits bound what a Conn reads from its peer, so that a hostile or broken
// peer cannot make this process allocate without bound. The zero value of
// each field means its default.
type Limits struct {
	// Line is the longest line accepted, newline excluded (default 64 KiB;
	// CCTools itself never sends more than 4 KiB).
	Line int
	// Body is the largest length-prefixed body read into memory: a command,
	// an environment entry, a task's stdout (default 64 MiB).
	Body int64
	// File is the largest file body streamed to disk (default 1 TiB).
	File int64
}

const (
	defaultLine = 64 << 10
	defaultBody = 64 << 20
	defaultFile = 1 << 40
)

func (l Limits) withDefaults() Limits {
	if l.Line <= 0 {
		l.Line = defaultLine
	}
	if l.Body <= 0 {
		l.Body = defaultBody
	}
	if l.File <= 0 {
		l.File = defaultFile
	}
	return l
}

// ErrTooLong is returned (wrapped) when a line or a length exceeds Limits.
var ErrTooLong = errors.New("exceeds limit")

// Conn reads and writes protocol messages on a byte stream. Reads and writes
// are independent: one goroutine may read while another writes, but two
// goroutines must not read (or write) at once.
type Conn struct {
	r      *bufio.Reader
	w      *bufio.Writer
	limits Limits
	line   []byte
	wbuf   []byte
}

// NewConn returns a Conn on rw with the given limits.
func NewConn(rw io.ReadWriter, limits Limits) *Conn {
	return &Conn{
		r:      bufio.NewReaderSize(rw, 64<<10),
		w:      bufio.NewWriterSize(rw, 64<<10),
		limits: limits.withDefaults(),
	}
}

// Limits returns the limits in force.
func (c *Conn) Limits() Limits { return c.limits }

// ReadLine reads one line and returns it without its newline. The returned
// slice is valid until the next read.
func (c *Conn) ReadLine() ([]byte, error) {
	c.line = c.line[:0]
	for {
		frag, err := c.r.ReadSlice('\n')
		if len(c.line)+len(frag) > c.limits.Line+1 {
			return nil, fmt.Errorf("line of more than %d bytes: %w", c.limits.Line, ErrTooLong)
		}
		if err == nil {
			if len(c.line) == 0 {
				return trimEOL(frag), nil
			}
			c.line = append(c.line, frag...)
			return trimEOL(c.line), nil
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF && len(c.line)+len(frag) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		c.line = append(c.line, frag...)
	}
}

func trimEOL(b []byte) []byte { return b[:len(b)-1] }

// ReadMessage reads one line and parses it. Bodies that follow the line are
// not read: the caller reads them with ReadBody or CopyBody.
func (c *Conn) ReadMessage() (Message, error) {
	line, err := c.ReadLine()
	if err != nil {
		return nil, err
	}
	return Parse(line)
}

// ReadBody reads an n-byte body into memory, refusing more than Limits.Body.
func (c *Conn) ReadBody(n int64) ([]byte, error) {
	if n < 0 || n > c.limits.Body {
		return nil, fmt.Errorf("body of %d bytes (limit %d): %w", n, c.limits.Body, ErrTooLong)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, noEOF(err)
	}
	return b, nil
}

// CopyBody copies an n-byte body to w, refusing more than Limits.File. If w
// fails, the rest of the body is still consumed so that the stream stays in
// step, and w's error is returned.
func (c *Conn) CopyBody(w io.Writer, n int64) error {
	if n < 0 || n > c.limits.File {
		return fmt.Errorf("file of %d bytes (limit %d): %w", n, c.limits.File, ErrTooLong)
	}
	body := &io.LimitedReader{R: c.r, N: n}
	_, err := io.Copy(w, body)
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			if _, derr := io.Copy(io.Discard, body); derr != nil {
				return noEOF(derr)
			}
			if body.N > 0 {
				return io.ErrUnexpectedEOF
			}
			return we.err
		}
		return err
	}
	if body.N > 0 {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// DiscardBody skips an n-byte body.
func (c *Conn) DiscardBody(n int64) error {
	return c.CopyBody(io.Discard, n)
}

// writeError marks an error from the destination of CopyBody, as opposed to
// one from the connection.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// GuardWriter wraps w so that CopyBody can tell its errors from the
// connection's: after a destination error the connection is still usable.
func GuardWriter(w io.Writer) io.Writer { return guardWriter{w} }

type guardWriter struct{ w io.Writer }

func (g guardWriter) Write(p []byte) (int, error) {
	n, err := g.w.Write(p)
	if err != nil {
		return n, &writeError{err}
	}
	return n, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Send appends m to the write buffer. Call Flush to put it on the wire.
func (c *Conn) Send(m Message) error {
	c.wbuf = m.AppendTo(c.wbuf[:0])
	_, err := c.w.Write(c.wbuf)
	return err
}

// SendBody writes a message followed by its body.
func (c *Conn) SendBody(m Message, body []byte) error {
	if err := c.Send(m); err != nil {
		return err
	}
	_, err := c.w.Write(body)
	return err
}

// SendFrom writes a message followed by exactly n bytes copied from r.
func (c *Conn) SendFrom(m Message, r io.Reader, n int64) error {
	if err := c.Send(m); err != nil {
		return err
	}
	copied, err := io.CopyN(c.w, r, n)
	if err != nil {
		return fmt.Errorf("sending %d bytes (sent %d): %w", n, copied, err)
	}
	return nil
}

// WriteRaw writes bytes as they are (a body, or a line built by hand).
func (c *Conn) WriteRaw(b []byte) error {
	_, err := c.w.Write(b)
	return err
}

// Flush writes buffered messages to the stream.
func (c *Conn) Flush() error { return c.w.Flush() }

// Buffered reports how many bytes wait in the write buffer.
func (c *Conn) Buffered() int { return c.w.Buffered() }

// fields splits a line on single spaces (the protocol never uses runs of
// spaces or tabs), without allocating more than the slice.
func fields(line []byte, dst [][]byte) [][]byte {
	dst = dst[:0]
	for len(line) > 0 {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			dst = append(dst, line)
			break
		}
		if i > 0 {
			dst = append(dst, line[:i])
		}
		line = line[i+1:]
	}
	return dst
}

func atoi(b []byte) (int64, error) {
	return strconv.ParseInt(string(b), 10, 64)
}
