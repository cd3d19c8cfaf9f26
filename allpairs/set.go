package allpairs

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Item is one element of a set: a file, and the name it has in the output.
type Item struct {
	Name    string // the file name (directory sets) or the line as written (set lists)
	Path    string // where to read it
	Size    int64
	ModTime time.Time // when it was last modified, as the set was read
}

// Set is one input of All-Pairs, read from a directory or a set-list file.
type Set struct {
	Source string // the directory or set list it was read from
	Items  []Item
}

// Paths returns the items' paths.
func (s *Set) Paths() []string {
	p := make([]string, len(s.Items))
	for i, it := range s.Items {
		p[i] = it.Path
	}
	return p
}

// Sizes returns the items' sizes in bytes.
func (s *Set) Sizes() []int64 {
	sz := make([]int64, len(s.Items))
	for i, it := range s.Items {
		sz[i] = it.Size
	}
	return sz
}

// Bytes returns the total size of the set's items.
func (s *Set) Bytes() int64 {
	var n int64
	for _, it := range s.Items {
		n += it.Size
	}
	return n
}

// Same reports whether s and t hold the same files in the same order.
func (s *Set) Same(t *Set) bool {
	return slices.Equal(s.Paths(), t.Paths())
}

// ReadSet reads a set from path: a directory (its regular files, sorted by
// name; names starting with "." are skipped) or a set-list file (one path per
// line; blank lines are skipped; relative paths are relative to the current
// directory, as in CCTools). Every item must exist and be a readable regular
// file, and the set must not be empty; the error says which item is wrong
// (with the set list's line number).
func ReadSet(path string) (*Set, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", path, pathErr(err))
	}
	if st.IsDir() {
		return readDir(path)
	}
	return readList(path)
}

func readDir(dir string) (*Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", dir, pathErr(err))
	}
	set := &Set{Source: dir}
	for _, e := range entries { // ReadDir sorts by name
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p) // follows symbolic links
		if err != nil {
			return nil, fmt.Errorf("set %s: %s: %w", dir, e.Name(), pathErr(err))
		}
		if !st.Mode().IsRegular() {
			continue
		}
		if err := readable(p); err != nil {
			return nil, fmt.Errorf("set %s: %s: %w", dir, e.Name(), err)
		}
		set.Items = append(set.Items, Item{Name: e.Name(), Path: p, Size: st.Size(), ModTime: st.ModTime()})
	}
	if len(set.Items) == 0 {
		return nil, fmt.Errorf("set %s: the directory has no files", dir)
	}
	return set, nil
}

func readList(list string) (*Set, error) {
	f, err := os.Open(list)
	if err != nil {
		return nil, fmt.Errorf("set list %s: %w", list, pathErr(err))
	}
	defer f.Close()
	set := &Set{Source: list}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		p := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(p) == "" {
			continue
		}
		if strings.IndexByte(p, 0) >= 0 {
			return nil, fmt.Errorf("%s:%d: a NUL byte: this is not a set list (one file path per line)", list, line)
		}
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s:%d: %s: %w", list, line, p, pathErr(err))
		case !st.Mode().IsRegular():
			return nil, fmt.Errorf("%s:%d: %s: not a regular file", list, line, p)
		}
		if err := readable(p); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", list, line, p, err)
		}
		set.Items = append(set.Items, Item{Name: p, Path: p, Size: st.Size(), ModTime: st.ModTime()})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("set list %s: a line longer than 1 MiB: this is not a set list (one file path per line)", list)
		}
		return nil, fmt.Errorf("set list %s: %w", list, err)
	}
	if len(set.Items) == 0 {
		return nil, fmt.Errorf("set list %s: no files listed", list)
	}
	return set, nil
}

func readable(path string) error {
	if err := unix.Access(path, unix.R_OK); err != nil {
		return fmt.Errorf("not readable: %w", err)
	}
	return nil
}

// pathErr drops the path from an *fs.PathError, which the caller's message
// already names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
