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

func TestFormat(t *testing.T) {
	got := string(encode(t, records[:3]))
	want := "0 0 1\n0\n1 2 12\nhello\nworld\n\n12 3 0\n\n"
	if got != want {
		t.Errorf("encoded = %q, want %q", got, want)
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
	good := string(encode(t, records[:2])) // 3 lines: 0 0 1/0, then 4 lines
	tests := []struct {
		name, data string
		line       int
		reason     string
	}{
		{"letters in header", good + "1 x 3\nabc\n", 7, `header "1 x 3\n" is not "X Y LENGTH"`},
		{"negative", "-1 0 1\na\n", 1, "is not"},
		{"two spaces", good + "1  2 3\nabc\n", 7, "is not"},
		{"missing field", "1 2\nab\n", 1, "is not"},
		{"no newline after value", "1 2 3\nabcd\n", 1, `3 value bytes are followed by "d", not a newline`},
		{"garbage tail", good + "hello", 7, `header "hello"`},
		{"zeros then garbage", good + "\x00\x00x", 7, "is not"},
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
	if err := os.WriteFile(path, append(data, "7 7 10\nabc"...), 0o644); err != nil {
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
	if !reflect.DeepEqual(loaded, records[:3]) || w.Torn() != int64(len("7 7 10\nabc")) {
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
