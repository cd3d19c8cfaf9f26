// Package sparsematrix reads and writes rightsize's sparse-matrix file: the
// result and the checkpoint of a Wavefront or All-Pairs run, one record per
// finished cell, appended the moment the cell is done.
//
// A file starts with a header holding the format's version and metadata,
// then holds one record per cell, a header line and the cell's bytes:
//
//	%rightsize-sparsematrix 2 LENGTH CHECKSUM\n
//	<LENGTH bytes of metadata>\n
//	x y length checksum\n
//	<length bytes>\n
//
// x and y are non-negative decimal integers and the value may hold any bytes,
// newlines included. A checksum is the CRC-32C (Castagnoli) of its line up to
// the space before it ("x y length") followed by the bytes after the line,
// as 8 lowercase hexadecimal digits: a flipped byte in a value, or a record
// moved to another cell by an edit of its header, no longer matches. The
// metadata is the engines' (what the cells were computed from, for
// example); this package keeps it and does not read it.
//
// Version 1 files, written before checksums, have no file header and
// records "x y length\n<bytes>\n". They are read as they are; [Open]
// appends to them in version 1, and [Writer.Rewrite] turns them into the
// current version. Every new file is written in the current version.
//
// Records are only ever appended; a cell recorded twice keeps its last
// value. A process killed while appending can leave the last record (or a
// new file's header) incomplete (torn): readers ignore it, and [Open] cuts
// it off before appending, so a re-run after a crash loads every finished
// cell and nothing else. Anything else that does not parse or does not match
// its checksum is a [CorruptError], reported with the line and byte where
// the file stops making sense and with the command that cuts the file back
// to the records before it.
//
// The package knows nothing of what the cells mean or in which order they are
// computed; the engines (multicore, the distributed master) decide that.
package sparsematrix

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Version is the format version this package writes.
const Version = 2

// MaxValue is the largest value (or metadata) a record may hold. A header
// announcing more is corrupt rather than torn: no writer produces it.
const MaxValue = 1 << 30

// magic starts a file of version 2 or later.
const magic = "%rightsize-sparsematrix"

const (
	// maxHeader1 bounds a version 1 record's header line: three 19-digit
	// numbers, two spaces and the newline.
	maxHeader1 = 3*19 + 3
	// maxHeader2 adds a space and the 8-digit checksum.
	maxHeader2 = maxHeader1 + 9
	// maxFileHeader bounds the file header line.
	maxFileHeader = len(magic) + 3*20
)

// castagnoli is the CRC-32C table (never written after it is made).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	Name    string // the file's name, or "" for a plain reader
	Line    int    // the 1-based line on which the bad record starts
	Offset  int64  // the byte at which it starts: the end of the intact records before it
	Records int64  // the intact records before it
	Reason  string
}

func (e *CorruptError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("sparse matrix:%d: corrupt record at byte %d: %s", e.Line, e.Offset, e.Reason)
	}
	s := fmt.Sprintf("%s:%d: corrupt record at byte %d: %s; ", e.Name, e.Line, e.Offset, e.Reason)
	if e.Records == 0 {
		return s + fmt.Sprintf("no intact record comes before it: remove %s to start over", shellQuote(e.Name))
	}
	return s + fmt.Sprintf("the %d records before it are intact: 'truncate -s %d %s' keeps them and drops the rest (cells dropped are computed again)",
		e.Records, e.Offset, shellQuote(e.Name))
}

// shellQuote quotes s for a shell command line, if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Reader reads records from a sparse-matrix stream.
type Reader struct {
	br      *bufio.Reader
	name    string
	version int    // 0 until the file header (or its absence) is read
	meta    []byte // the file header's metadata
	off     int64  // end of the last complete record
	line    int    // lines before off
	records int64  // complete records before off
	torn    int64  // bytes of a torn final record, once found
	err     error  // sticky: io.EOF or a *CorruptError
}

// NewReader returns a Reader reading from r. name is used in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), name: name}
}

// Read returns the next record. At the end of the stream, and at a torn
// final record, it returns io.EOF; Torn then says how many bytes were
// ignored. A damaged record is a *CorruptError. Errors are sticky.
func (r *Reader) Read() (Record, error) {
	if r.err == nil && r.version == 0 {
		r.err = r.readFileHeader()
	}
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
	r.records++
	return rec, nil
}

// Meta returns the metadata of the file's header: nil for a file without
// any (version 1, or written by NewWriter), and for an empty file.
func (r *Reader) Meta() ([]byte, error) {
	if r.err == nil && r.version == 0 {
		r.err = r.readFileHeader()
	}
	if r.err != nil && r.err != io.EOF {
		return nil, r.err
	}
	return r.meta, nil
}

// Version returns the format version of the stream, once Read or Meta has
// been called: 1 for a file without a header, otherwise the header's (an
// empty stream is of the current version).
func (r *Reader) Version() int { return r.version }

// Offset returns the number of bytes of complete records read so far: after
// a torn record, the length the file should be cut to.
func (r *Reader) Offset() int64 { return r.off }

// Torn returns the size of the torn final record that Read ignored, or 0.
func (r *Reader) Torn() int64 { return r.torn }

func (r *Reader) corrupt(format string, args ...any) error {
	return &CorruptError{Name: r.name, Line: r.line + 1, Offset: r.off, Records: r.records, Reason: fmt.Sprintf(format, args...)}
}

// endTorn records that the stream ended inside a record of n bytes.
func (r *Reader) endTorn(n int64) error {
	r.torn = n
	return io.EOF
}

// readFileHeader reads the file header, if the stream has one, and sets the
// version. A stream ending inside it is torn (an empty file).
func (r *Reader) readFileHeader() error {
	first, err := r.br.Peek(1)
	switch {
	case err == io.EOF:
		r.version = Version
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", r.name, err)
	case first[0] != magic[0]:
		r.version = 1
		return nil
	}
	line, err := r.br.ReadSlice('\n')
	switch {
	case err == io.EOF:
		if isFileHeaderPrefix(line) {
			return r.endTorn(int64(len(line)))
		}
		return r.corrupt("file header %q is not %q", truncate(line, 40), magic+" VERSION LENGTH CHECKSUM")
	case err == bufio.ErrBufferFull || (err == nil && len(line) > maxFileHeader):
		return r.corrupt("file header longer than %d bytes", maxFileHeader)
	case err != nil:
		return fmt.Errorf("read %s: %w", r.name, err)
	}
	fields := strings.Split(string(line[:len(line)-1]), " ")
	var version, length int
	var sum uint32
	ok := len(fields) >= 2 && fields[0] == magic
	if ok {
		version, err = strconv.Atoi(fields[1])
		ok = err == nil && version >= 2
	}
	if ok && version > Version {
		return fmt.Errorf("%s: sparse-matrix format version %d is newer than this program reads (%d): use a newer rightsize", r.name, version, Version)
	}
	if ok && len(fields) == 4 {
		length, err = strconv.Atoi(fields[2])
		ok = err == nil && length >= 0 && len(fields[2]) <= 18
		sum, ok = parseChecksum([]byte(fields[3]), ok)
	} else {
		ok = false
	}
	if !ok {
		return r.corrupt("file header %q is not %q", truncate(line, 40), magic+" VERSION LENGTH CHECKSUM")
	}
	if length > MaxValue {
		return r.corrupt("metadata of %d bytes is larger than the limit of %d", length, MaxValue)
	}
	hlen := int64(len(line))
	got := crc32.Checksum(line[:bytes.LastIndexByte(line, ' ')], castagnoli)
	meta, err := readValue(r.br, length)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return r.endTorn(hlen + int64(len(meta)))
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", r.name, err)
	}
	end, err := r.br.ReadByte()
	switch {
	case err == io.EOF:
		return r.endTorn(hlen + int64(length))
	case err != nil:
		return fmt.Errorf("read %s: %w", r.name, err)
	case end != '\n':
		return r.corrupt("the file header's %d bytes of metadata are followed by %q, not a newline", length, string(rune(end)))
	}
	if got = crc32.Update(got, castagnoli, meta); got != sum {
		return r.corrupt("the file header's checksum %08x does not match its bytes (%08x)", sum, got)
	}
	r.version, r.meta = version, meta
	r.off = hlen + int64(length) + 1
	r.line = 2 + bytes.Count(meta, []byte{'\n'})
	return nil
}

// next parses one record, returning it with its size in bytes and the
// number of newlines it holds.
func (r *Reader) next() (Record, int64, int, error) {
	header, err := r.br.ReadSlice('\n')
	maxHeader := maxHeader1
	if r.version >= 2 {
		maxHeader = maxHeader2
	}
	switch {
	case err == io.EOF && len(header) == 0:
		return Record{}, 0, 0, io.EOF
	case err == io.EOF:
		if isHeaderPrefix(header, r.version) {
			return Record{}, 0, 0, r.endTorn(int64(len(header)))
		}
		return Record{}, 0, 0, r.badTail(header)
	case err == bufio.ErrBufferFull || (err == nil && len(header) > maxHeader):
		return Record{}, 0, 0, r.corrupt("header line longer than %d bytes", maxHeader)
	case err != nil:
		return Record{}, 0, 0, fmt.Errorf("read %s: %w", r.name, err)
	}
	x, y, length, sum, ok := parseHeader(header[:len(header)-1], r.version)
	if !ok {
		return Record{}, 0, 0, r.badTail(header)
	}
	if length > MaxValue {
		return Record{}, 0, 0, r.corrupt("value of %d bytes is larger than the limit of %d", length, MaxValue)
	}
	hlen := int64(len(header))
	var got uint32
	if r.version >= 2 {
		// Now: the header's bytes are gone once the value is read.
		got = crc32.Checksum(header[:bytes.LastIndexByte(header, ' ')], castagnoli)
	}
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
	if r.version >= 2 {
		if got = crc32.Update(got, castagnoli, value); got != sum {
			return Record{}, 0, 0, r.corrupt("cell (%d,%d): checksum %08x does not match the record's bytes (%08x)", x, y, sum, got)
		}
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
	want := "X Y LENGTH CHECKSUM"
	if r.version < 2 {
		want = "X Y LENGTH"
	}
	return r.corrupt("header %q is not %q", truncate(header, 40), want)
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

// parseHeader parses "x y length" (version 1) or "x y length checksum".
func parseHeader(h []byte, version int) (x, y, length int, sum uint32, ok bool) {
	var fields [3]int
	for i := range fields {
		j := 0
		for j < len(h) && '0' <= h[j] && h[j] <= '9' {
			j++
		}
		if j == 0 || j > 18 {
			return 0, 0, 0, 0, false
		}
		v, err := strconv.Atoi(string(h[:j]))
		if err != nil {
			return 0, 0, 0, 0, false
		}
		fields[i] = v
		h = h[j:]
		if i < 2 || version >= 2 {
			if len(h) == 0 || h[0] != ' ' {
				return 0, 0, 0, 0, false
			}
			h = h[1:]
		}
	}
	if version >= 2 {
		sum, ok = parseChecksum(h, true)
		return fields[0], fields[1], fields[2], sum, ok
	}
	return fields[0], fields[1], fields[2], 0, len(h) == 0
}

// parseChecksum parses 8 lowercase hexadecimal digits; ok is passed through
// when they are.
func parseChecksum(h []byte, ok bool) (uint32, bool) {
	if len(h) != 8 {
		return 0, false
	}
	var sum uint32
	for _, c := range h {
		switch {
		case '0' <= c && c <= '9':
			sum = sum<<4 | uint32(c-'0')
		case 'a' <= c && c <= 'f':
			sum = sum<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return sum, ok
}

// isHeaderPrefix reports whether h (with no newline) could be the start of a
// record's header: digits and single spaces, at most three numbers, and in
// version 2 the start of a checksum after them.
func isHeaderPrefix(h []byte, version int) bool {
	if len(h) > maxHeader2 {
		return false
	}
	fields, n := 0, 0 // fields complete, characters of the current one
	for _, c := range h {
		switch {
		case c == ' ' && n > 0 && (fields < 2 || fields == 2 && version >= 2):
			fields++
			n = 0
		case fields < 3 && '0' <= c && c <= '9',
			fields == 3 && n < 8 && ('0' <= c && c <= '9' || 'a' <= c && c <= 'f'):
			n++
		default:
			return false
		}
	}
	return true
}

// isFileHeaderPrefix reports whether h (with no newline) could be the start
// of a file header.
func isFileHeaderPrefix(h []byte) bool {
	if len(h) <= len(magic) {
		return strings.HasPrefix(magic, string(h))
	}
	if len(h) > maxFileHeader || !strings.HasPrefix(string(h), magic+" ") {
		return false
	}
	for _, c := range h[len(magic):] {
		if !(c == ' ' || '0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
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

// appendFileHeader appends the file header holding meta to b.
func appendFileHeader(b, meta []byte) []byte {
	start := len(b)
	b = append(b, magic...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, Version, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(meta)), 10)
	b = appendChecksum(b, crc32.Update(crc32.Checksum(b[start:], castagnoli), castagnoli, meta))
	b = append(b, '\n')
	b = append(b, meta...)
	return append(b, '\n')
}

// appendRecord appends the record (x, y, value) in the given version to b.
func appendRecord(b []byte, version, x, y int, value []byte) []byte {
	start := len(b)
	b = strconv.AppendInt(b, int64(x), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(y), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(value)), 10)
	if version >= 2 {
		b = appendChecksum(b, crc32.Update(crc32.Checksum(b[start:], castagnoli), castagnoli, value))
	}
	b = append(b, '\n')
	b = append(b, value...)
	return append(b, '\n')
}

// appendChecksum appends a space and sum as 8 hexadecimal digits.
func appendChecksum(b []byte, sum uint32) []byte {
	const digits = "0123456789abcdef"
	b = append(b, ' ')
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, digits[sum>>shift&0xf])
	}
	return b
}

// Writer appends records. It is safe for concurrent use: each record goes
// out in one write, whole, in the order Append is called.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	f       *os.File // nil unless opened by Open
	path    string   // the file's path, if opened by Open
	version int      // of the records written
	header  bool     // the file header is still to be written, before the first record
	empty   bool     // the file holds no record
	meta    []byte
	buf     []byte
	torn    int64
}

// NewWriter returns a Writer appending records, in the current version and
// without metadata, to w, for example standard output. The file header goes
// out with the first record, so that a stream with no records is empty.
// Nothing is read or locked.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, version: Version, header: true} }

// ErrLocked is returned by Open when another process has the file open.
var ErrLocked = errors.New("in use by another process")

// Open opens the sparse-matrix file at path for appending, creating it if it
// does not exist. It first calls fn (if not nil) for every complete record
// already in the file, then cuts off a torn final record so that new records
// start on a record boundary. A new (or empty) file is given a header of the
// current version, without metadata; records are appended in the file's
// version. The file is locked (flock) against a second writer until Close; a
// file locked by another process is ErrLocked.
func Open(path string, fn func(Record) error) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lock(f, path); err != nil {
		f.Close()
		return nil, err
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
	w := &Writer{w: f, f: f, path: path, version: r.Version(), meta: r.meta, torn: r.Torn(), empty: r.records == 0}
	if r.Offset() == 0 {
		w.version = Version
		if _, err := f.Write(appendFileHeader(nil, nil)); err != nil {
			f.Close()
			return nil, fmt.Errorf("write the header of %s: %w", path, err)
		}
	}
	return w, nil
}

func lock(f *os.File, path string) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return fmt.Errorf("%s: %w", path, ErrLocked)
	case err != nil:
		return fmt.Errorf("lock %s: %w", path, err)
	}
	return nil
}

// Torn returns how many bytes of a torn final record Open cut off.
func (w *Writer) Torn() int64 { return w.torn }

// Meta returns the metadata in the file's header, as Open found it or
// Rewrite wrote it.
func (w *Writer) Meta() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.meta
}

// Version returns the format version the Writer appends in.
func (w *Writer) Version() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version
}

// Append writes the record (x, y, value) and hands it to the operating
// system before returning, so that it survives the process being killed.
// (Surviving a machine crash needs Sync.)
func (w *Writer) Append(x, y int, value []byte) error {
	return w.AppendRecords([]Record{{X: x, Y: y, Value: value}})
}

// AppendRecords appends the records in one write, as Append does one.
func (w *Writer) AppendRecords(recs []Record) error {
	for _, r := range recs {
		if r.X < 0 || r.Y < 0 {
			return fmt.Errorf("sparse matrix: negative cell (%d,%d)", r.X, r.Y)
		}
		if len(r.Value) > MaxValue {
			return fmt.Errorf("sparse matrix: cell (%d,%d): value of %d bytes is larger than the limit of %d", r.X, r.Y, len(r.Value), MaxValue)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf[:0]
	if w.header {
		b = appendFileHeader(b, nil)
	}
	for _, r := range recs {
		b = appendRecord(b, w.version, r.X, r.Y, r.Value)
	}
	if cap(b) <= 1<<20 {
		w.buf = b // keep the buffer unless huge values grew it
	}
	if _, err := w.w.Write(b); err != nil {
		if len(recs) == 1 {
			return fmt.Errorf("append cell (%d,%d): %w", recs[0].X, recs[0].Y, err)
		}
		return fmt.Errorf("append %d cells: %w", len(recs), err)
	}
	w.header, w.empty = false, false
	return nil
}

// Rewrite replaces the file opened by Open with one of the current version
// that holds meta in its header and, in their order, the records for which
// keep returns true (all of them if keep is nil). The new file is written
// beside the old one, synced, and renamed over it, so that a crash leaves
// one or the other, whole; it is locked before it takes the old one's
// place. Appends then go to the new file. A file without records is
// rewritten in place: a crash then leaves it empty or torn, which is the
// same.
func (w *Writer) Rewrite(meta []byte, keep func(Record) bool) (err error) {
	if w.f == nil {
		return errors.New("sparse matrix: Rewrite needs a file opened by Open")
	}
	if len(meta) > MaxValue {
		return fmt.Errorf("sparse matrix: metadata of %d bytes is larger than the limit of %d", len(meta), MaxValue)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.empty {
		if err := w.f.Truncate(0); err != nil {
			return fmt.Errorf("rewrite %s: %w", w.path, err)
		}
		if _, err := w.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewrite %s: %w", w.path, err)
		}
		if _, err := w.f.Write(appendFileHeader(nil, meta)); err != nil {
			return fmt.Errorf("rewrite %s: %w", w.path, err)
		}
		w.version, w.meta, w.header = Version, meta, false
		return nil
	}
	dir, base := filepath.Split(w.path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", w.path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("rewrite %s: %w", w.path, err)
		}
	}()
	if st, err := w.f.Stat(); err == nil {
		if err := tmp.Chmod(st.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := lock(tmp, tmp.Name()); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(tmp, 256<<10)
	bw.Write(appendFileHeader(nil, meta))
	var buf []byte
	kept := 0
	_, err = scan(NewReader(io.NewSectionReader(w.f, 0, 1<<62), w.path), func(rec Record) error {
		if keep != nil && !keep(rec) {
			return nil
		}
		kept++
		buf = appendRecord(buf[:0], Version, rec.X, rec.Y, rec.Value)
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), w.path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename itself; best effort
		d.Close()
	}
	w.f.Close()
	w.f, w.w = tmp, tmp
	w.version, w.meta, w.header, w.empty = Version, meta, false, kept == 0
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
