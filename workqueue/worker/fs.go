package worker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The worker makes, moves and reads files in its workspace relative to
// open directories, with O_NOFOLLOW at every step: a symbolic link that a
// task (or a process a task left behind) put anywhere is never followed by
// the worker itself, so nothing the master sends makes the worker write, or
// read, outside the workspace.

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openDir opens the directory rel below dir one element at a time,
// following no symbolic link: an element that is one fails with ELOOP or
// ENOTDIR. With create, missing directories are made. rel has been checked
// by wire.CheckRelativePath.
func openDir(dir *os.File, rel string, create bool) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), ".", dirFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir.Name(), Err: err}
	}
	for _, el := range strings.Split(rel, "/") {
		if el == "" || el == "." {
			continue
		}
		if create {
			if err := unix.Mkdirat(fd, el, 0o755); err != nil && err != unix.EEXIST {
				unix.Close(fd)
				return nil, &os.PathError{Op: "mkdir", Path: rel, Err: err}
			}
		}
		next, err := unix.Openat(fd, el, dirFlags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: rel, Err: err}
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), rel)), nil
}

// openAt opens name in dir without following it.
func openAt(dir *os.File, name string, flags int, perm uint32) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path.Join(dir.Name(), name), Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name)), nil
}

// createAt creates name in dir, failing if anything (a symbolic link
// included) is there already.
func createAt(dir *os.File, name string, perm uint32) (*os.File, error) {
	return openAt(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, perm)
}

// lstatAt describes name in dir without following it.
func lstatAt(dir *os.File, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return st, &os.PathError{Op: "lstat", Path: path.Join(dir.Name(), name), Err: err}
	}
	return st, nil
}

// names lists a directory just opened, sorted.
func names(dir *os.File) ([]string, error) {
	list, err := dir.Readdirnames(-1)
	slices.Sort(list)
	return list, err
}

// removeAt removes name, a file or a whole tree, from dir. os.RemoveAll
// follows no symbolic link either, but works on paths: this works below a
// directory that its owner may not list.
func removeAt(dir *os.File, name string) error {
	err := unix.Unlinkat(int(dir.Fd()), name, 0)
	switch err {
	case nil, unix.ENOENT:
		return nil
	case unix.EISDIR:
		return removeDirAt(dir, name)
	}
	return &os.PathError{Op: "unlink", Path: path.Join(dir.Name(), name), Err: err}
}

// removeDirAt removes the directory name, and all it holds, from dir.
func removeDirAt(dir *os.File, name string) error {
	sub, err := openAt(dir, name, dirFlags, 0)
	if errnoOf(err) == unix.EACCES {
		unix.Fchmodat(int(dir.Fd()), name, 0o700, 0) // a task made it unreadable
		sub, err = openAt(dir, name, dirFlags, 0)
	}
	if err != nil {
		if errnoOf(err) == unix.ENOENT {
			return nil
		}
		return err
	}
	entries, err := sub.ReadDir(-1)
	for _, e := range entries {
		if err != nil {
			break
		}
		if e.IsDir() {
			err = removeDirAt(sub, e.Name())
		} else {
			err = removeAt(sub, e.Name())
		}
	}
	sub.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(int(dir.Fd()), name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "rmdir", Path: path.Join(dir.Name(), name), Err: err}
	}
	return nil
}

// copyAt copies the open regular file src to a new file name in dir.
func copyAt(src *os.File, dir *os.File, name string, perm uint32) error {
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	dst, err := createAt(dir, name, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src) // copy_file_range where the file system has it
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(int(dir.Fd()), name, 0)
	}
	return err
}

// split cuts a checked relative path into its directory ("" for none) and
// its last element.
func split(rel string) (dir, base string) {
	dir, base = path.Split(path.Clean(rel))
	return dir, base
}

// randomName is an unguessable file name.
func randomName() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// errnoOf is the errno behind err, EIO if there is none.
func errnoOf(err error) unix.Errno {
	var en unix.Errno
	if errors.As(err, &en) {
		return en
	}
	return unix.EIO
}

// sameContents reports whether files a and b, read from their start, hold
// the same bytes; an error reading either counts as a difference.
func sameContents(a, b *os.File) bool {
	sa, err := a.Stat()
	if err != nil {
		return false
	}
	sb, err := b.Stat()
	if err != nil || sa.Size() != sb.Size() {
		return false
	}
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for off := int64(0); off < sa.Size(); {
		n, err := a.ReadAt(bufA, off)
		if n == 0 {
			return false
		}
		if m, _ := b.ReadAt(bufB[:n], off); m != n || !bytes.Equal(bufA[:n], bufB[:n]) {
			return false
		}
		if err != nil && err != io.EOF {
			return false
		}
		off += int64(n)
	}
	return true
}
