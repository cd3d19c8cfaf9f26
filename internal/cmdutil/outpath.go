package cmdutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// CheckOutputPath returns a usage error, naming flag (as the user wrote
// it: "-o", "--matrix"), when the file at path could not be created: its
// directory does not exist or is not a directory, or path is a directory
// itself. Tools check their output files with it before anything runs, so
// that a mistyped path costs no run and says which flag is wrong. A path
// it accepts may still fail when written (permissions, a full disk); that
// error names the file. An empty path (the flag not given) is accepted.
func CheckOutputPath(flag, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return Usagef("%s %s: is a directory; name a file", flag, path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Usagef("%s %s: directory %s does not exist", flag, path, dir)
	case err != nil:
		return Usagef("%s %s: %v", flag, path, err)
	case !st.IsDir():
		return Usagef("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// SameFile returns a test of whether a file is the one already at path
// (the same file, by device and inode, whatever its name) and that file's
// description, or nil if nothing is there yet. Tools use it to refuse an
// output that would overwrite one of the run's inputs.
func SameFile(path string) (is func(string) bool, out fs.FileInfo) {
	out, err := os.Stat(path)
	if err != nil {
		return nil, nil // to be created: no input
	}
	return func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && os.SameFile(st, out)
	}, out
}
