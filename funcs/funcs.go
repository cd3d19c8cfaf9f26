// Package funcs is rightsize's function interface: the user's F, whether an
// external program, a C shared library loaded with dlopen, or a Go function,
// behind one calling convention that the engines use.
//
// An All-Pairs function is a [Pair]: M[i,j] = F(A[i], B[j]). A Wavefront
// function is a [Cell]: R[i,j] = F(R[i-1,j], R[i,j-1], R[i-1,j-1]). A
// [Registry] turns the name a user types on the command line into one of
// them:
//
//	builtin:NAME     a Go function registered under NAME (see Registry)
//	path/to/lib.so   a C shared library exporting allpairs_function or
//	                 wavefront_function (see [Registry.OpenPair])
//	anything else    an external program, run directly (never through a
//	                 shell) as `prog [args] A B` or `prog [args] X Y D`, whose
//	                 standard output is the result
//
// A Pair may also compute a block of cells in one call ([BlockPair]), as
// builtin:bytediff does: the engines then pass each input through the
// processor's cache once per block rather than once per cell.
//
// Functions must be side-effect free: they read only their inputs and produce
// only their result. A function that fails — a non-zero exit, a signal, a
// timeout, a Go error or panic — returns a *CallError; it never becomes a
// wrong result. The exception is a shared library that crashes (a fatal
// signal in its code): that cannot be contained in this process, which
// exits with status 1 after one line naming the call (see
// [Registry.OpenPair]).
//
// The package does not schedule calls or decide where they run; that is the
// job of the engines (multicore, distmaster).
package funcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Kind says how a function is run.
type Kind int

const (
	// Program is an external executable, one process per call.
	Program Kind = iota
	// SharedLibrary is a C function in a .so, called in-process.
	SharedLibrary
	// GoFunc is a Go function, called in-process.
	GoFunc
)

func (k Kind) String() string {
	switch k {
	case Program:
		return "program"
	case SharedLibrary:
		return "shared library"
	case GoFunc:
		return "Go function"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// InMemory reports whether functions of this kind read their inputs from
// memory (Input.Data), so that an engine should map the input files, rather
// than from files named on a command line (Input.Path).
func (k Kind) InMemory() bool { return k != Program }

// Info describes a function.
type Info struct {
	Kind Kind
	// Name is the name the function was opened with, for messages.
	Name string
	// Path is the program or library file, or "" for Go functions. An engine
	// that runs the function elsewhere ships this file.
	Path string
}

// Input is one argument of a call: a file, its contents, or both. Functions
// of an in-memory kind use Data when it is non-nil and read Path otherwise;
// programs use Path when it is set and write Data to a temporary file
// otherwise. An empty input is Data of length zero (not nil) with no Path.
type Input struct {
	Path string
	Data []byte
}

// Pair is an All-Pairs function, F(a, b). Implementations are safe for
// concurrent use. Close releases the function (unloading a library, removing
// temporary files); calls must not be in flight when it is called.
type Pair interface {
	Call(ctx context.Context, a, b Input) ([]byte, error)
	Info() Info
	Close() error
}

// BlockPair is a Pair that can also compute a block of cells in one call.
// For a function whose cost is streaming its inputs, such as bytediff, a
// block is cheaper than its cells one by one: the block's inputs pass
// through the processor's cache a section at a time, each section read from
// memory once for the whole block rather than once for every cell it is in.
// An engine with several rows of A in memory calls CallBlock instead of
// Call.
type BlockPair interface {
	Pair
	// CallBlock sets out[r*len(b)+c] to F(a[r], b[c]) for every r and c,
	// exactly what Call returns for that cell; out has len(a)*len(b)
	// elements. An error fails every cell of the block.
	CallBlock(ctx context.Context, a, b []Input, out [][]byte) error
}

// Cell is a Wavefront function, F(x, y, d) of the cells to the left (x),
// below (y) and diagonally left-below (d). Implementations are safe for
// concurrent use, and Close is as for Pair.
type Cell interface {
	Call(ctx context.Context, x, y, d Input) ([]byte, error)
	Info() Info
	Close() error
}

// PairFunc is the Go form of an All-Pairs function.
type PairFunc func(a, b []byte) ([]byte, error)

// PairBlockFunc is the Go form of a BlockPair's block: it returns the
// len(a)*len(b) results F(a[r], b[c]), row by row (index r*len(b)+c).
type PairBlockFunc func(a, b [][]byte) ([][]byte, error)

// CellFunc is the Go form of a Wavefront function.
type CellFunc func(x, y, d []byte) ([]byte, error)

// Options control how functions are run.
type Options struct {
	// Args are extra arguments given to a program before its inputs (the
	// command line's -e). Other kinds ignore them.
	Args []string
	// Timeout bounds each call; zero means none. A program that runs longer
	// is sent SIGTERM, then SIGKILL a second later. An in-process function
	// cannot be stopped: the call returns a timeout error and the function is
	// left to finish in the background, its result discarded.
	Timeout time.Duration
	// TempDir holds the temporary files of program calls; "" means
	// os.TempDir().
	TempDir string
	// StderrTail is how many bytes at the end of a failing program's
	// standard error are kept for the error; zero means 4096.
	StderrTail int
	// MaxResult bounds a result's size; zero means 64 MiB. A program whose
	// output is larger fails.
	MaxResult int
}

func (o Options) stderrTail() int {
	if o.StderrTail > 0 {
		return o.StderrTail
	}
	return 4096
}

func (o Options) maxResult() int {
	if o.MaxResult > 0 {
		return o.MaxResult
	}
	return 64 << 20
}

// CallError reports a failed call: how it failed and what the function
// printed on its standard error.
type CallError struct {
	Func string // the function's name, as opened
	// ExitCode is the program's exit status, or -1 if it did not exit
	// normally (a signal, a timeout, a failure to start) or is not a program.
	ExitCode int
	Signal   syscall.Signal // the signal that killed the program, or 0
	TimedOut bool           // the call ran past Options.Timeout
	Timeout  time.Duration
	Stderr   []byte // the tail of standard error (programs only)
	Err      error  // the underlying error, if any: a Go error, a panic, a start failure
}

func (e *CallError) Error() string {
	var b strings.Builder
	b.WriteString(e.Func)
	switch {
	case e.TimedOut:
		fmt.Fprintf(&b, ": timed out after %v", e.Timeout)
	case e.Signal != 0:
		fmt.Fprintf(&b, ": killed by signal %d (%v)", int(e.Signal), e.Signal)
	case e.ExitCode > 0:
		fmt.Fprintf(&b, ": exited with status %d", e.ExitCode)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if s := bytes.TrimSpace(e.Stderr); len(s) > 0 {
		fmt.Fprintf(&b, "; stderr: %s", s)
	}
	return b.String()
}

func (e *CallError) Unwrap() error { return e.Err }

// ErrTooLarge is returned (inside a *CallError) when a result exceeds
// Options.MaxResult or an input is too large for a shared library's int
// length.
var ErrTooLarge = errors.New("too large")

// ErrNoCgo is returned when opening a shared library in a program built
// without cgo.
var ErrNoCgo = errors.New("shared-library functions need a build with cgo (CGO_ENABLED=1 and gcc)")

// readInput returns the bytes of an input for an in-memory function.
func readInput(in Input) ([]byte, error) {
	if in.Data != nil || in.Path == "" {
		return in.Data, nil
	}
	return os.ReadFile(in.Path)
}
