package multicore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestItemLoad: small files are read into the buffer get gives, big ones
// mapped, empty ones are empty but not nil, and a missing one is an
// *os.PathError naming it.
func TestItemLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) (string, []byte) {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*31 + size)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p, data
	}
	tests := []struct {
		name   string
		size   int
		mapped bool
	}{
		{"empty", 0, false},
		{"one byte", 1, false},
		{"100 KB", 100_000, false},
		{"at the mapping threshold", mapAbove, false},
		{"over it", mapAbove + 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, want := write(tc.name, tc.size)
			var gave []byte
			get := func(n int) []byte {
				gave = make([]byte, n, n+10)
				return gave
			}
			var it item
			if err := it.load(path, get, mapAbove); err != nil {
				t.Fatal(err)
			}
			if it.data == nil || !bytes.Equal(it.data, want) {
				t.Fatalf("loaded %d bytes (nil: %v), want the file's %d", len(it.data), it.data == nil, len(want))
			}
			if it.mapped != tc.mapped {
				t.Errorf("mapped = %v, want %v", it.mapped, tc.mapped)
			}
			inBuffer := gave != nil && len(it.data) > 0 && &gave[0] == &it.data[0]
			if want := !tc.mapped && tc.size > 0; inBuffer != want {
				t.Errorf("data in the buffer get gave: %v, want %v", inBuffer, want)
			}
			var put [][]byte
			it.drop(func(b []byte) { put = append(put, b) })
			if wantPut := !tc.mapped && tc.size > 0; (len(put) == 1) != wantPut {
				t.Errorf("drop gave back %d buffers, want one: %v", len(put), wantPut)
			}
		})
	}
	var it item
	err := it.load(filepath.Join(dir, "missing"), func(n int) []byte { return make([]byte, n) }, mapAbove)
	var pe *os.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) || pe.Path != filepath.Join(dir, "missing") {
		t.Errorf("load of a missing file: %v, want a not-exist *os.PathError naming it", err)
	}
}

// TestBuffers: a buffer given back is used again for an item it fits, the
// smallest that fits first; when none fits, the biggest free one is let go
// instead of piling up.
func TestBuffers(t *testing.T) {
	var b buffers
	small, big := b.get(100), b.get(1000)
	b.put(big)
	b.put(small)
	if got := b.get(50); &got[0] != &small[0] || len(got) != 50 {
		t.Errorf("get(50) did not reuse the 100-byte buffer")
	}
	if got := b.get(900); &got[0] != &big[0] {
		t.Errorf("get(900) did not reuse the 1000-byte buffer")
	}
	b.put(small)
	b.put(big)
	if got := b.get(5000); len(got) != 5000 || len(b.free) != 1 || cap(b.free[0]) != cap(small) {
		t.Errorf("get(5000) with no buffer that fits: %d bytes, free list %d long; want the biggest dropped", len(got), len(b.free))
	}
}
