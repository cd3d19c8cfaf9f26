package cmdutil

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// OutputFile is a result file (-o FILE) written under a temporary name in
// the same directory and renamed over FILE by Commit, so that a run that is
// refused, fails or is interrupted leaves the user's previous FILE as it
// was, and a reader never sees a half-written one. Abort removes the
// temporary file. A FILE that exists and is not a regular file (/dev/null,
// a named pipe, a terminal) is written directly: it cannot be replaced.
type OutputFile struct {
	*os.File
	path string // the final path; "" when written directly
	done bool   // committed or aborted
}

// CreateOutput creates the temporary file for the result file at path.
func CreateOutput(path string) (*OutputFile, error) {
	target := path
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		// Replace the file the link points to, as writing through it would.
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return nil, err
		}
	}
	if st, err := os.Stat(target); err == nil && !st.Mode().IsRegular() {
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, err
		}
		return &OutputFile{File: f}, nil
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	for {
		// 0666 as os.Create, less the umask.
		name := filepath.Join(dir, "."+base+"."+strconv.FormatUint(uint64(rand.Uint32()), 36)+".tmp")
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &OutputFile{File: f, path: target}, nil
	}
}

// Commit makes the written file the result: it is synced, closed and
// renamed over the final path.
func (o *OutputFile) Commit() error {
	o.done = true
	if o.path == "" {
		return o.Close()
	}
	err := o.Sync()
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.Name(), o.path)
	}
	if err != nil {
		os.Remove(o.Name())
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	return nil
}

// Abort closes and removes the temporary file, leaving the final path as
// it was. It does nothing after Commit, so that it can be deferred.
func (o *OutputFile) Abort() {
	if o.done {
		return
	}
	o.done = true
	o.Close()
	if o.path != "" {
		os.Remove(o.Name())
	}
}
