package pool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWatchPolicy edits a real policy file — in place, by a rename as
// editors do, badly — and waits for each reading: a good edit gives the new
// policy, a bad one its error with file and line.
func TestWatchPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pool.conf")
	renameText(t, path, "max_workers: 1\ndistribution: a=1\n")
	// next waits for the reading that satisfies ok; an in-place write may
	// be read half done first.
	next := watchReadings(t, path)
	// The watch is on once WatchPolicy has returned.
	renameText(t, path, "max_workers: 2\ndistribution: a=1\n")
	next("max_workers 2", func(r reading) bool { return r.p != nil && r.p.MaxWorkers == 2 })

	renameText(t, path, "max_workers: 3\ndistribution: a=1, b(=2\n")
	r := next("an error", func(r reading) bool { return r.err != nil })
	if !strings.Contains(r.err.Error(), path+":2: distribution:") {
		t.Errorf("bad edit: %v, want %s:2", r.err, path)
	}

	if err := os.WriteFile(path, []byte("max_workers: 4\ndistribution: a=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	next("max_workers 4 (written in place)", func(r reading) bool { return r.p != nil && r.p.MaxWorkers == 4 })
}
