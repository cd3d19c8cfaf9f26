package funcs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// outputFiles are the two files a call's standard output and error go to,
// kept for the next call. They are opened for appending, and each call's
// output is what it appended: the files are not emptied after every call,
// which would cost two ftruncates a call (on a disk file system, two journal
// updates), but once they have grown past outputReuse.
type outputFiles struct {
	stdout, stderr *os.File
	outFd, errFd   int
	outEnd, errEnd int64  // where the next call's output will start
	outRead        bool   // outEnd is past this call's standard output
	scratch        []byte // receives a call's standard output first
}

// outputReuse is how big the output files may grow before they are
// emptied.
const outputReuse = 1 << 20

func newOutputFiles(tempDir string) (*outputFiles, error) {
	stdout, err := openOutput(tempDir)
	if err != nil {
		return nil, err
	}
	stderr, err := openOutput(tempDir)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	return &outputFiles{
		stdout: stdout, stderr: stderr,
		outFd: int(stdout.Fd()), errFd: int(stderr.Fd()),
		scratch: make([]byte, 4096),
	}, nil
}

func (s *outputFiles) close() {
	s.stdout.Close()
	s.stderr.Close()
}

// result returns what the call wrote on its standard output, without
// trailing newlines, in a slice of its own; limit bounds its size. A small
// output takes one pread.
func (s *outputFiles) result(limit int) ([]byte, error) {
	n, err := pread(s.outFd, s.scratch, s.outEnd)
	if err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	var out []byte
	if n < len(s.scratch) {
		out = append([]byte(nil), trimNewlines(s.scratch[:n])...)
	} else {
		// The scratch buffer is full: there may be more.
		var st unix.Stat_t
		if err := unix.Fstat(s.outFd, &st); err != nil {
			return nil, fmt.Errorf("read output: %w", err)
		}
		size := st.Size - s.outEnd
		if size > int64(limit) {
			return nil, fmt.Errorf("output of %d bytes: %w (limit %d)", size, ErrTooLarge, limit)
		}
		out = make([]byte, size)
		n = copy(out, s.scratch)
		k, err := pread(s.outFd, out[n:], s.outEnd+int64(n))
		if err != nil {
			return nil, fmt.Errorf("read output: %w", err)
		}
		n += k
		out = trimNewlines(out[:n])
	}
	s.outEnd += int64(n)
	s.outRead = true
	if len(out) > limit {
		return nil, fmt.Errorf("output of %d bytes: %w (limit %d)", len(out), ErrTooLarge, limit)
	}
	return out, nil
}

// stderrTail returns the last n bytes of what the call wrote on its standard
// error.
func (s *outputFiles) stderrTail(n int) []byte {
	var st unix.Stat_t
	if unix.Fstat(s.errFd, &st) != nil || st.Size <= s.errEnd {
		return nil
	}
	off := max(st.Size-int64(n), s.errEnd)
	buf := make([]byte, st.Size-off)
	k, _ := pread(s.errFd, buf, off)
	return buf[:k]
}

// next readies the files for the next call, whatever this one wrote, and
// reports whether they can be used again.
func (s *outputFiles) next() bool {
	var st unix.Stat_t
	if !s.outRead {
		if unix.Fstat(s.outFd, &st) != nil {
			return false
		}
		s.outEnd = st.Size
	}
	s.outRead = false
	if unix.Fstat(s.errFd, &st) != nil {
		return false
	}
	s.errEnd = st.Size
	if s.outEnd+s.errEnd <= outputReuse {
		return true
	}
	if s.stdout.Truncate(0) != nil || s.stderr.Truncate(0) != nil {
		return false
	}
	s.outEnd, s.errEnd = 0, 0
	return true
}

// pread reads into b from off until b is full or the file ends.
func pread(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
		if k < len(b[n-k:]) {
			// A short read of a regular file is its end: save the
			// pread that would return 0.
			break
		}
	}
	return n, nil
}

// openAppendTemp opens an unlinked temporary file in append mode, so that a
// child writing to it always writes at the end, even after the parent
// truncates it for reuse.
func openAppendTemp(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "rightsize-out-")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	return os.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
}
