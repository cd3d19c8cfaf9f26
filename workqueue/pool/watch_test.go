package pool

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWatchPolicy edits a real policy file — in place, by a rename as
// editors do, badly — and waits for each reading: a good edit gives the new
// policy, a bad one its error with file and line.
func TestWatchPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pool.conf")
	write := func(text string) {
		t.Helper()
		tmp := filepath.Join(dir, ".pool.conf.tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("max_workers: 1\ndistribution: a=1\n")

	type reading struct {
		p   *Policy
		err error
	}
	readings := make(chan reading, 16)
	watcher, err := WatchPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watcher.Run(ctx, func(p *Policy, err error) { readings <- reading{p, err} })
	}()
	t.Cleanup(func() { cancel(); <-done })

	// next waits for the reading that satisfies ok; an in-place write may
	// be read half done first.
	next := func(what string, ok func(reading) bool) reading {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case r := <-readings:
				if ok(r) {
					return r
				}
			case <-timeout:
				t.Fatalf("no reading with %s", what)
			}
		}
	}
	// The watch is on once WatchPolicy has returned.
	write("max_workers: 2\ndistribution: a=1\n")
	next("max_workers 2", func(r reading) bool { return r.p != nil && r.p.MaxWorkers == 2 })

	write("max_workers: 3\ndistribution: a=1, b(=2\n")
	r := next("an error", func(r reading) bool { return r.err != nil })
	if !strings.Contains(r.err.Error(), path+":2: distribution:") {
		t.Errorf("bad edit: %v, want %s:2", r.err, path)
	}

	if err := os.WriteFile(path, []byte("max_workers: 4\ndistribution: a=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	next("max_workers 4 (written in place)", func(r reading) bool { return r.p != nil && r.p.MaxWorkers == 4 })
}
