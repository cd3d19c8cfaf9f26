package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// ReadPolicy reads and checks the policy file at path.
func ReadPolicy(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParsePolicy(f, path)
}

// WatchPolicy reads the policy file at path again whenever it changes —
// written in place, or replaced as editors do — until ctx ends, and calls
// loaded with the new policy, or with the error that keeps the last good
// one. It returns ctx's error, or an error if the file's directory cannot
// be watched.
func WatchPolicy(ctx context.Context, path string, loaded func(*Policy, error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", path, err)
	}
	defer w.Close()
	// The directory, so that a file replaced by a rename is still seen.
	dir, name := filepath.Split(filepath.Clean(path))
	if dir == "" {
		dir = "."
	}
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watching %s: %w", path, err)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("watching " + path + ": watcher closed")
			}
			loaded(nil, fmt.Errorf("watching %s: %w", path, err))
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("watching " + path + ": watcher closed")
			}
			if filepath.Base(ev.Name) != name || !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) {
				continue
			}
			loaded(ReadPolicy(path))
		}
	}
}
