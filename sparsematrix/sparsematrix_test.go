package sparsematrix_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/sparsematrix"
)

// records are the test data: values with newlines, empty values and a
// rewritten cell.
var records = []sparsematrix.Record{
	{X: 0, Y: 0, Value: []byte("0")},
	{X: 1, Y: 2, Value: []byte("hello\nworld\n")},
	{X: 12, Y: 3, Value: []byte{}},
	{X: 3, Y: 4, Value: []byte("1854882")},
	{X: 1, Y: 2, Value: []byte("second")},
}

func encode(t *testing.T, recs []sparsematrix.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := sparsematrix.NewWriter(&buf)
	for _, r := range recs {
		if err := w.Append(r.X, r.Y, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readAll(data []byte) ([]sparsematrix.Record, *sparsematrix.Reader, error) {
	r := sparsematrix.NewReader(bytes.NewReader(data), "m")
	var out []sparsematrix.Record
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		out = append(out, rec)
	}
}

// emptyHeader is the file header without metadata.
const emptyHeader = "%rightsize-sparsematrix 2 0 7309a9e0\n\n"

func TestFormat(t *testing.T) {
	got := string(encode(t, records[:3]))
	want := "%rightsize-sparsematrix 2 0 7309a9e0\n\n" +
		"0 0 1 b5707289\n0\n1 2 12 a94348f2\nhello\nworld\n\n12 3 0 facfc229\n\n"
	if got != want {
		t.Errorf("encoded = %q, want %q", got, want)
	}
	if got := encode(t, nil); len(got) != 0 {
		t.Errorf("no records encoded as %q, want nothing", got)
	}
}

// TestVersion1 reads files written before checksums, appends to one in its
// own version, and rewrites it in the current one.
func TestVersion1(t *testing.T) {
	const old = "0 0 1\n0\n1 2 12\nhello\nworld\n\n12 3 0\n\n"
	got, r, err := readAll([]byte(old))
	if err != nil || !reflect.DeepEqual(got, records[:3]) || r.Version() != 1 {
		t.Fatalf("read %v, version %d, err %v", got, r.Version(), err)
	}
	if _, _, err := readAll([]byte(old + "3 4 x\n")); err == nil || !strings.Contains(err.Error(), `is not "X Y LENGTH"`) {
		t.Errorf("a bad version 1 header: %v", err)
	}

	path := filepath.Join(t.TempDir(), "old.matrix")
	os.WriteFile(path, []byte(old), 0o640)
	w, err := sparsematrix.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Version() != 1 || w.Meta() != nil {
		t.Errorf("Open of a version 1 file: version %d, meta %q", w.Version(), w.Meta())
	}
	w.Append(3, 4, []byte("1854882"))
	if data, _ := os.ReadFile(path); string(data) != old+"3 4 7\n1854882\n" {
		t.Errorf("appended to a version 1 file: %q", data)
	}

	if err := w.Rewrite([]byte(`{"f":1}`), func(r sparsematrix.Record) bool { return r.X != 12 }); err != nil {
		t.Fatal(err)
	}
	w.Append(1, 2, []byte("second"))
	data, _ := os.ReadFile(path)
	want := "%rightsize-sparsematrix 2 7 33239111\n{\"f\":1}\n" + string(encode(t, []sparsematrix.Record{records[0], records[1], records[3], records[4]}))[len(emptyHeader):]
	if string(data) != want {
		t.Errorf("after Rewrite and Append:\n%q\nwant\n%q", data, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("Rewrite changed the permissions to %v", st.Mode().Perm())
	}
	if _, err := sparsematrix.Open(path, nil); !errors.Is(err, sparsematrix.ErrLocked) {
		t.Errorf("Open of a rewritten file still open: %v, want ErrLocked", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("Rewrite left %d files in the directory", len(entries))
	}
}

// TestMeta: Open gives a new file a header without metadata, Rewrite sets
// it, and a later Open (and a plain Reader) find it.
func TestMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m")
	w, err := sparsematrix.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != emptyHeader {
		t.Errorf("a new file holds %q", data)
	}
	meta := []byte("what the cells\nwere computed from")
	if err := w.Rewrite([]byte("first"), nil); err != nil { // in place: no records
		t.Fatal(err)
	}
	w.Append(5, 6, []byte("dropped"))
	if err := w.Rewrite(meta, func(sparsematrix.Record) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if err := w.Rewrite(meta, nil); err != nil { // in place again
		t.Fatal(err)
	}
	w.Append(1, 1, []byte("kept"))
	w.Close()

	w, err = sparsematrix.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if string(w.Meta()) != string(meta) {
		t.Errorf("Meta = %q, want %q", w.Meta(), meta)
	}
	f, _ := os.Open(path)
	defer f.Close()
	r := sparsematrix.NewReader(f, path)
	if m, err := r.Meta(); err != nil || string(m) != string(meta) {
		t.Errorf("Reader.Meta = %q, %v", m, err)
	}
	if cells, err := sparsematrix.Load(path); err != nil || len(cells) != 1 || string(cells[sparsematrix.Key{X: 1, Y: 1}]) != "kept" {
		t.Errorf("Load = %v, %v", cells, err)
	}
}

// TestEveryFlippedByte flips each bit of a file in turn: a reader must never
// return a record that was not written. Most flips are corrupt records; a
// flip in the length of the last record can make it look torn, which loses
// the record but never changes it.
func TestEveryFlippedByte(t *testing.T) {
	data := encode(t, records)
	for i := range data {
		for bit := range 8 {
			flipped := append([]byte(nil), data...)
			flipped[i] ^= 1 << bit
			got, r, err := readAll(flipped)
			var ce *sparsematrix.CorruptError
			if err != nil && !errors.As(err, &ce) && !strings.Contains(err.Error(), "is newer") {
				t.Fatalf("byte %d bit %d: %v", i, bit, err)
			}
			if len(got) > len(records) || !reflect.DeepEqual(got, records[:len(got)]) && len(got) > 0 {
				t.Fatalf("byte %d bit %d: read %v, not a prefix of what was written", i, bit, got)
			}
			if err == nil && len(got) < len(records) && r.Torn() == 0 {
				t.Fatalf("byte %d bit %d: %d records and no error", i, bit, len(got))
			}
		}
	}
}

// TestRelabelledRecord: a record moved to another cell by an edit of its
// header no longer matches its checksum.
func TestRelabelledRecord(t *testing.T) {
	data := strings.Replace(string(encode(t, records)), "\n3 4 7 ", "\n4 3 7 ", 1)
	_, _, err := readAll([]byte(data))
	var ce *sparsematrix.CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cell (4,3): checksum") || ce.Records != 3 {
		t.Errorf("relabelled record: %v", err)
	}
}

// TestRepairHint damages a value in the middle of a file: Open refuses it
// with the command that cuts it back to the intact records, and the file so
// cut opens with them.
func TestRepairHint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "R.matrix")
	data := encode(t, records)
	data[bytes.Index(data, []byte("1854882"))+3] ^= 1
	os.WriteFile(path, data, 0o644)
	_, err := sparsematrix.Open(path, nil)
	cut := len(encode(t, records[:3]))
	hint := fmt.Sprintf("the 3 records before it are intact: 'truncate -s %d %s' keeps them", cut, path)
	if err == nil || !strings.Contains(err.Error(), "cell (3,4): checksum") || !strings.Contains(err.Error(), hint) {
		t.Fatalf("Open of a damaged file: %v\nwant %q", err, hint)
	}
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
	var got []sparsematrix.Record
	w, err := sparsematrix.Open(path, func(r sparsematrix.Record) error { got = append(got, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !reflect.DeepEqual(got, records[:3]) {
		t.Errorf("after the truncate: %v", got)
	}
	if _, _, err := readAll([]byte("%rightsize-sparsematrix 2 0 7309a9e0\n\n1 1 1 00000000\n1\n")); err == nil || !strings.Contains(err.Error(), "no intact record comes before it: remove m to start over") {
		t.Errorf("a damaged first record: %v", err)
	}
}

func TestNewerVersion(t *testing.T) {
	_, _, err := readAll([]byte("%rightsize-sparsematrix 3 0 00000000\n\n"))
	if err == nil || !strings.Contains(err.Error(), "version 3 is newer") {
		t.Errorf("a version 3 file: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	got, r, err := readAll(encode(t, records))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, records) {
		t.Errorf("read %v, want %v", got, records)
	}
	if r.Torn() != 0 {
		t.Errorf("Torn = %d on a whole file", r.Torn())
	}
}

// TestEveryTornPrefix cuts a file at every byte: each prefix must read as the
// records it holds completely, with the rest reported as torn, never as
// corrupt.
func TestEveryTornPrefix(t *testing.T) {
	data := encode(t, records)
	var ends []int // the end offset of each record
	for i := range records {
		ends = append(ends, len(encode(t, records[:i+1])))
	}
	for n := 0; n <= len(data); n++ {
		got, r, err := readAll(data[:n])
		if err != nil {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
		whole := 0
		for whole < len(ends) && ends[whole] <= n {
			whole++
		}
		if !reflect.DeepEqual(got, records[:whole]) && !(whole == 0 && got == nil) {
			t.Fatalf("prefix of %d bytes read %v, want the first %d records", n, got, whole)
		}
		if off := r.Offset(); int(off)+int(r.Torn()) != n {
			t.Fatalf("prefix of %d bytes: Offset %d + Torn %d != %d", n, off, r.Torn(), n)
		}
	}
}

func TestZeroFilledTailIsTorn(t *testing.T) {
	data := append(encode(t, records[:2]), make([]byte, 300)...)
	got, r, err := readAll(data)
	if err != nil || len(got) != 2 || r.Torn() != 300 {
		t.Errorf("got %d records, torn %d, err %v; want 2, 300, nil", len(got), r.Torn(), err)
	}
}

func TestCorrupt(t *testing.T) {
	good := string(encode(t, records[:2])) // 8 lines: the file header, 0 0 1/0, then 4 lines
	tests := []struct {
		name, data string
		line       int
		reason     string
	}{
		{"letters in header", good + "1 x 3\nabc\n", 9, `header "1 x 3\n" is not "X Y LENGTH CHECKSUM"`},
		{"no checksum", good + "1 2 3\nabc\n", 9, `is not "X Y LENGTH CHECKSUM"`},
		{"bad checksum", good + "1 2 3 00000000\nabc\n", 9, `cell (1,2): checksum 00000000 does not match the record's bytes (`},
		{"bad header checksum", "%rightsize-sparsematrix 2 0 00000000\n\n", 1, `the file header's checksum 00000000 does not match`},
		{"bad file header", "%rightsize-sparsematrix x\n", 1, `file header "%rightsize-sparsematrix x\n" is not`},
		{"version 1 letters in header", "0 0 1\n0\n1 x 3\nabc\n", 3, `header "1 x 3\n" is not "X Y LENGTH"`},
		{"negative", "-1 0 1\na\n", 1, "is not"},
		{"two spaces", good + "1  2 3\nabc\n", 9, "is not"},
		{"missing field", "1 2\nab\n", 1, "is not"},
		{"no newline after value", "1 2 3\nabcd\n", 1, `3 value bytes are followed by "d", not a newline`},
		{"garbage tail", good + "hello", 9, `header "hello"`},
		{"zeros then garbage", good + "\x00\x00x", 9, "is not"},
		{"long header", strings.Repeat("1", 100) + "\n", 1, "header line longer than"},
		{"huge value", "1 1 99999999999\n", 1, "larger than the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readAll([]byte(tt.data))
			var ce *sparsematrix.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want *CorruptError", err)
			}
			if ce.Line != tt.line || !strings.Contains(ce.Error(), tt.reason) || !strings.HasPrefix(ce.Error(), fmt.Sprintf("m:%d: ", tt.line)) {
				t.Errorf("error = %q (line %d), want line %d and %q", ce, ce.Line, tt.line, tt.reason)
			}
		})
	}
}

func TestOpenResumesAfterTornRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "R.matrix")
	data := encode(t, records[:3])
	if err := os.WriteFile(path, append(data, "7 7 10 12345678\nabc"...), 0o644); err != nil {
		t.Fatal(err)
	}
	var loaded []sparsematrix.Record
	w, err := sparsematrix.Open(path, func(r sparsematrix.Record) error {
		loaded = append(loaded, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded, records[:3]) || w.Torn() != int64(len("7 7 10 12345678\nabc")) {
		t.Errorf("Open loaded %v, torn %d", loaded, w.Torn())
	}
	for _, r := range records[3:] {
		if err := w.Append(r.X, r.Y, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := sparsematrix.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[sparsematrix.Key][]byte{}
	for _, r := range records {
		want[sparsematrix.Key{X: r.X, Y: r.Y}] = r.Value
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %v, want %v", got, want)
	}
}

func TestOpenCorruptAndLocked(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	const badData = "0 0 1\n0\nnot a record\n1 1 1\n5\n"
	os.WriteFile(bad, []byte(badData), 0o644)
	if _, err := sparsematrix.Open(bad, nil); err == nil || !strings.Contains(err.Error(), bad+":3: corrupt record at byte 8") {
		t.Errorf("Open of a corrupt file: %v", err)
	}
	if data, _ := os.ReadFile(bad); string(data) != badData {
		t.Errorf("Open changed a corrupt file to %q", data)
	}

	path := filepath.Join(dir, "m")
	w, err := sparsematrix.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := sparsematrix.Open(path, nil); !errors.Is(err, sparsematrix.ErrLocked) {
		t.Errorf("second Open = %v, want ErrLocked", err)
	}
	if _, err := sparsematrix.Load(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want ErrNotExist", err)
	}
}

func TestLargeValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	recs := []sparsematrix.Record{{X: 1, Y: 1, Value: big}, {X: 2, Y: 1, Value: []byte("x")}}
	got, _, err := readAll(encode(t, recs))
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Errorf("large value did not round-trip: %v", err)
	}
}

func Example() {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("example-%d.matrix", os.Getpid()))
	defer os.Remove(path)

	// A run appends each cell as it finishes.
	w, _ := sparsematrix.Open(path, nil)
	w.Append(1, 1, []byte("3"))
	w.Append(2, 1, []byte("6"))
	w.Close()

	// A re-run loads what is there before appending more.
	w, _ = sparsematrix.Open(path, func(r sparsematrix.Record) error {
		fmt.Printf("R[%d,%d] = %s\n", r.X, r.Y, r.Value)
		return nil
	})
	w.Append(1, 2, []byte("6"))
	w.Close()

	cells, _ := sparsematrix.Load(path)
	fmt.Println(len(cells), "cells")
	// Output:
	// R[1,1] = 3
	// R[2,1] = 6
	// 3 cells
}
