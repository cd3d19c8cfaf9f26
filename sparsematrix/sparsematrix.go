// Package sparsematrix reads and writes rightsize's sparse-matrix file: the
// result and the checkpoint of a Wavefront or All-Pairs run, one record per
// finished cell, appended the moment the cell is done.
//
// A record is a header line and the cell's bytes:
//
//	x y length\n
//	<length bytes>\n
//
// x and y are non-negative decimal integers and the value may hold any bytes,
// newlines included. Records are only ever appended; a cell recorded twice
// keeps its last value. A process killed while appending can leave the last
// record incomplete (torn): readers ignore it, and [Open] cuts it off before
// appending, so a re-run after a crash loads every finished cell and nothing
// else. Anything else that does not parse is a [CorruptError], reported with
// the line and byte where the file stops making sense.
//
// The package knows nothing of what the cells mean or in which order they are
// computed; the engines (multicore, the distributed master) decide that.
package sparsematrix

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// MaxValue is the largest value a record may hold. A header announcing more
// is corrupt rather than torn: no writer produces it.
const MaxValue = 1 << 30

// maxHeader bounds the header line: three 19-digit numbers, two spaces and
// the newline.
const maxHeader = 3*19 + 3

// Key is a cell's coordinates.
type Key struct{ X, Y int }

// Record is one cell and its value.
type Record struct {
	X, Y  int
	Value []byte
}

// CorruptError reports a file that is damaged in a way a crash while
// appending cannot explain.
type CorruptError struct {
	Name   string // the file's name, or "" for a plain reader
	Line   int    // the 1-based line on which the bad record starts
	Offset int64  // the byte at which it starts
	Reason string
}

func (e *CorruptError) Error() string {
	name := e.Name
	if name == "" {
		name = "sparse matrix"
	}
	return fmt.Sprintf("%s:%d: corrupt record at byte %d: %s", name, e.Line, e.Offset, e.Reason)
}

// Reader reads records from a sparse-matrix stream.
type Reader struct {
	br   *bufio.Reader
	name string
	off  int64 // end of the last complete record
	line int   // lines before off
	torn int64 // bytes of a torn final record, once found
	err  error // sticky: io.EOF or a *CorruptError
}

// NewReader returns a Reader reading from r. name is used in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), name: name}
}

// Read returns the next record. At the end of the stream, and at a torn
// final record, it returns io.EOF; Torn then says how many bytes were
// ignored. A damaged record is a *CorruptError. Errors are sticky.
func (r *Reader) Read() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	rec, n, lines, err := r.next()
	if err != nil {
		r.err = err
		return Record{}, err
	}
	r.off += n
	r.line += lines
	return rec, nil
}

// Offset returns the number of bytes of complete records read so far: after
// a torn record, the length the file should be cut to.
func (r *Reader) Offset() int64 { return r.off }

// Torn returns the size of the torn final record that Read ignored, or 0.
func (r *Reader) Torn() int64 { return r.torn }

func (r *Reader) corrupt(format string, args ...any) error {
	return &CorruptError{Name: r.name, Line: r.line + 1, Offset: r.off, Reason: fmt.Sprintf(format, args...)}
}

// endTorn records that the stream ended inside a record of n bytes.
func (r *Reader) endTorn(n int64) error {
	r.torn = n
	return io.EOF
}

// next parses one record, returning it with its size in bytes and the
// number of newlines it holds.
func (r *Reader) next() (Record, int64, int, error) {
	header, err := r.br.ReadSlice('\n')
	switch {
	case err == io.EOF && len(header) == 0:
		return Record{}, 0, 0, io.EOF
	case err == io.EOF:
		if isHeaderPrefix(header) {
			return Record{}, 0, 0, r.endTorn(int64(len(header)))
		}
		return Record{}, 0, 0, r.badTail(header)
	case err == bufio.ErrBufferFull || (err == nil && len(header) > maxHeader):
		return Record{}, 0, 0, r.corrupt("header line longer than %d bytes", maxHeader)
	case err != nil:
		return Record{}, 0, 0, fmt.Errorf("read %s: %w", r.name, err)
	}
	x, y, length, ok := parseHeader(header[:len(header)-1])
	if !ok {
		return Record{}, 0, 0, r.badTail(header)
	}
	if length > MaxValue {
		return Record{}, 0, 0, r.corrupt("value of %d bytes is larger than the limit of %d", length, MaxValue)
	}
	hlen := int64(len(header))
	value, err := readValue(r.br, length)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return Record{}, 0, 0, r.endTorn(hlen + int64(len(value)))
	}
	if err != nil {
		return Record{}, 0, 0, fmt.Errorf("read %s: %w", r.name, err)
	}
	end, err := r.br.ReadByte()
	switch {
	case err == io.EOF:
		return Record{}, 0, 0, r.endTorn(hlen + int64(length))
	case err != nil:
		return Record{}, 0, 0, fmt.Errorf("read %s: %w", r.name, err)
	case end != '\n':
		return Record{}, 0, 0, r.corrupt("cell (%d,%d): %d value bytes are followed by %q, not a newline", x, y, length, string(rune(end)))
	}
	lines := 2 + bytes.Count(value, []byte{'\n'})
	return Record{X: x, Y: y, Value: value}, hlen + int64(length) + 1, lines, nil
}

// badTail reports a header that does not parse, unless it and everything
// after it are NUL bytes: what a file system can leave at the end of a file
// whose last writes were lost in a machine crash, and so a torn record.
func (r *Reader) badTail(header []byte) error {
	if len(header) > 0 && header[0] == 0 && allZero(header) {
		n := int64(len(header))
		for {
			b, err := r.br.ReadByte()
			if err == io.EOF {
				return r.endTorn(n)
			}
			if err != nil || b != 0 {
				break
			}
			n++
		}
	}
	return r.corrupt("header %q is not \"X Y LENGTH\"", truncate(header, 40))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// readValue reads n bytes, allocating as the bytes arrive rather than
// trusting a header that may have been cut short: a torn header "1 2 9999…"
// must not allocate gigabytes.
func readValue(br *bufio.Reader, n int) ([]byte, error) {
	if n <= 1<<20 {
		buf := make([]byte, n)
		k, err := io.ReadFull(br, buf)
		return buf[:k], err
	}
	var buf bytes.Buffer
	k, err := io.CopyN(&buf, br, int64(n))
	if err == nil && k < int64(n) {
		err = io.ErrUnexpectedEOF
	}
	return buf.Bytes(), err
}

// parseHeader parses "x y length".
func parseHeader(h []byte) (x, y, length int, ok bool) {
	var fields [3]int
	for i := range fields {
		j := 0
		for j < len(h) && '0' <= h[j] && h[j] <= '9' {
			j++
		}
		if j == 0 || j > 18 {
			return 0, 0, 0, false
		}
		v, err := strconv.Atoi(string(h[:j]))
		if err != nil {
			return 0, 0, 0, false
		}
		fields[i] = v
		h = h[j:]
		if i < 2 {
			if len(h) == 0 || h[0] != ' ' {
				return 0, 0, 0, false
			}
			h = h[1:]
		}
	}
	return fields[0], fields[1], fields[2], len(h) == 0
}

// isHeaderPrefix reports whether h (with no newline) could be the start of a
// header: digits and single spaces, at most three numbers.
func isHeaderPrefix(h []byte) bool {
	if len(h) > maxHeader {
		return false
	}
	fields, digits := 0, 0
	for _, c := range h {
		switch {
		case '0' <= c && c <= '9':
			digits++
		case c == ' ' && digits > 0 && fields < 2:
			fields++
			digits = 0
		default:
			return false
		}
	}
	return true
}

// Load reads the sparse-matrix file at path into a map, ignoring a torn
// final record. A cell recorded more than once keeps its last value.
func Load(path string) (map[Key][]byte, error) {
	cells := map[Key][]byte{}
	err := Scan(path, func(rec Record) error {
		cells[Key{rec.X, rec.Y}] = rec.Value
		return nil
	})
	return cells, err
}

// Scan calls fn for every complete record of the file at path, in file
// order, and stops at the first error fn returns.
func Scan(path string, fn func(Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = scan(NewReader(f, path), fn)
	return err
}

func scan(r *Reader, fn func(Record) error) (*Reader, error) {
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		if err := fn(rec); err != nil {
			return r, err
		}
	}
}

// Writer appends records. It is safe for concurrent use: each record goes
// out in one write, whole, in the order Append is called.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	f    *os.File // nil unless opened by Open
	buf  []byte
	torn int64
}

// NewWriter returns a Writer appending records to w, for example standard
// output. Nothing is read or locked.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// ErrLocked is returned by Open when another process has the file open.
var ErrLocked = errors.New("in use by another process")

// Open opens the sparse-matrix file at path for appending, creating it if it
// does not exist. It first calls fn (if not nil) for every complete record
// already in the file, then cuts off a torn final record so that new records
// start on a record boundary. The file is locked (flock) against a second
// writer until Close; a file locked by another process is ErrLocked.
func Open(path string, fn func(Record) error) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if fn == nil {
		fn = func(Record) error { return nil }
	}
	r, err := scan(NewReader(io.NewSectionReader(f, 0, 1<<62), path), fn)
	if err != nil {
		f.Close()
		return nil, err
	}
	if r.Torn() > 0 {
		if err := f.Truncate(r.Offset()); err != nil {
			f.Close()
			return nil, fmt.Errorf("cut the torn final record of %s: %w", path, err)
		}
	}
	return &Writer{w: f, f: f, torn: r.Torn()}, nil
}

// Torn returns how many bytes of a torn final record Open cut off.
func (w *Writer) Torn() int64 { return w.torn }

// Append writes the record (x, y, value) and hands it to the operating
// system before returning, so that it survives the process being killed.
// (Surviving a machine crash needs Sync.)
func (w *Writer) Append(x, y int, value []byte) error {
	if x < 0 || y < 0 {
		return fmt.Errorf("sparse matrix: negative cell (%d,%d)", x, y)
	}
	if len(value) > MaxValue {
		return fmt.Errorf("sparse matrix: cell (%d,%d): value of %d bytes is larger than the limit of %d", x, y, len(value), MaxValue)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf[:0]
	b = strconv.AppendInt(b, int64(x), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(y), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(value)), 10)
	b = append(b, '\n')
	b = append(b, value...)
	b = append(b, '\n')
	if cap(b) <= 1<<20 {
		w.buf = b // keep the buffer unless one huge value grew it
	}
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("append cell (%d,%d): %w", x, y, err)
	}
	return nil
}

// Sync commits the file to stable storage. It does nothing for a Writer made
// by NewWriter.
func (w *Writer) Sync() error {
	if w.f == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Sync()
}

// Close closes a file opened by Open, releasing its lock. It does nothing for
// a Writer made by NewWriter.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}
