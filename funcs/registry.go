package funcs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rightsize/rightsize/internal/suggest"
)

// BuiltinPrefix starts the name of a built-in function on a command line.
const BuiltinPrefix = "builtin:"

// Registry maps built-in names to Go functions and opens functions by the
// name a user gives. A program that embeds the engines registers its own Go
// functions on a Registry and passes it to them. A Registry is not safe for
// concurrent registration; register before use.
type Registry struct {
	pairs  map[string]PairFunc
	blocks map[string]PairBlockFunc // the block forms of some pairs
	cells  map[string]CellFunc
}

// NewRegistry returns a Registry holding the built-in functions:
//
//	pairs: bytediff (alias bitwise), swalign
//	cells: sum, swcell, rdgame
func NewRegistry() *Registry {
	r := &Registry{pairs: map[string]PairFunc{}, blocks: map[string]PairBlockFunc{}, cells: map[string]CellFunc{}}
	r.RegisterPairBlock("bytediff", ByteDiff, ByteDiffBlock)
	r.RegisterPairBlock("bitwise", ByteDiff, ByteDiffBlock)
	r.RegisterPair("swalign", SWAlign)
	r.RegisterCell("sum", Sum)
	r.RegisterCell("swcell", SWCell)
	r.RegisterCell("rdgame", RDGame)
	return r
}

// RegisterPair registers f as the All-Pairs function builtin:name,
// replacing any function of that name.
func (r *Registry) RegisterPair(name string, f PairFunc) {
	r.pairs[name] = f
	delete(r.blocks, name)
}

// RegisterPairBlock registers f as the All-Pairs function builtin:name, as
// RegisterPair does, with block, its form for a block of cells at once (see
// BlockPair). block must give exactly f's result for every cell.
func (r *Registry) RegisterPairBlock(name string, f PairFunc, block PairBlockFunc) {
	r.pairs[name] = f
	r.blocks[name] = block
}

// RegisterCell registers f as the Wavefront function builtin:name,
// replacing any function of that name.
func (r *Registry) RegisterCell(name string, f CellFunc) { r.cells[name] = f }

// PairNames returns the names of the registered All-Pairs functions, sorted.
func (r *Registry) PairNames() []string { return sortedKeys(r.pairs) }

// CellNames returns the names of the registered Wavefront functions, sorted.
func (r *Registry) CellNames() []string { return sortedKeys(r.cells) }

func sortedKeys[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// cctoolsNames are the internal function names of CCTools' allpairs, accepted
// so that existing command lines keep working when no file of that name
// exists.
var cctoolsNames = map[string]string{"BITWISE": "bytediff", "SWALIGN": "swalign"}

// OpenPair opens the All-Pairs function named by spec:
//
//   - "builtin:NAME": the Go function registered as NAME.
//   - a path ending in ".so": a C shared library exporting
//     void *allpairs_function(const void *a, int alength, const void *b, int blength),
//     which returns a malloc'd NUL-terminated result that the engine frees.
//     It is called from many threads at once and must be thread-safe. It runs
//     in this process: if it crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, or
//     SIGABRT from abort or a failed libc check), the process writes one
//     line to standard error naming the function, the signal and the call
//     (its [Label], else its inputs' paths) and exits with status 1, since
//     the function may have corrupted memory the process shares. Opening the
//     first library installs the handler that does this; fatal signals from
//     anywhere else still reach Go's.
//   - anything else: an external program, run as `spec [opts.Args] A B`. A
//     name without a slash is looked up in the current directory, then in
//     $PATH.
func (r *Registry) OpenPair(spec string, opts Options) (Pair, error) {
	if name, ok := r.builtinName(spec); ok {
		f, ok := r.pairs[name]
		if !ok {
			return nil, unknownBuiltin(spec, name, "All-Pairs", r.PairNames())
		}
		if block, ok := r.blocks[name]; ok {
			return NewGoBlockPair(spec, f, block, opts), nil
		}
		return NewGoPair(spec, f, opts), nil
	}
	if isSharedLib(spec) {
		if err := checkFile(spec); err != nil {
			return nil, err
		}
		return openLibPair(spec, spec, opts)
	}
	path, err := findProgram(spec)
	if err != nil {
		return nil, err
	}
	prog, err := newProgram(spec, path, opts)
	if err != nil {
		return nil, err
	}
	return programPair{prog}, nil
}

// OpenCell opens the Wavefront function named by spec, as OpenPair does,
// with a library exporting
// void *wavefront_function(const void *x, int xlength, const void *y, int ylength, const void *d, int dlength)
// and a program run as `spec [opts.Args] X Y D` (left, below, diagonal).
func (r *Registry) OpenCell(spec string, opts Options) (Cell, error) {
	if name, ok := r.builtinName(spec); ok {
		f, ok := r.cells[name]
		if !ok {
			return nil, unknownBuiltin(spec, name, "Wavefront", r.CellNames())
		}
		return NewGoCell(spec, f, opts), nil
	}
	if isSharedLib(spec) {
		if err := checkFile(spec); err != nil {
			return nil, err
		}
		return openLibCell(spec, spec, opts)
	}
	path, err := findProgram(spec)
	if err != nil {
		return nil, err
	}
	prog, err := newProgram(spec, path, opts)
	if err != nil {
		return nil, err
	}
	return programCell{prog}, nil
}

// builtinName returns the registered name spec refers to, if it names a
// built-in: "builtin:NAME", or a CCTools internal name for which no file
// exists.
func (r *Registry) builtinName(spec string) (string, bool) {
	if name, ok := strings.CutPrefix(spec, BuiltinPrefix); ok {
		return name, true
	}
	if name, ok := cctoolsNames[spec]; ok {
		if _, err := os.Stat(spec); err != nil {
			return name, true
		}
	}
	return "", false
}

// unknownBuiltin is the error for spec, naming a built-in that is not
// among the kind's known ones: it names the one it is a typo of, else
// lists them.
func unknownBuiltin(spec, name, kind string, known []string) error {
	if near := suggest.Nearest(name, known); near != "" {
		return fmt.Errorf("%s: %w (did you mean %s%s?)", spec, errUnknownBuiltin, BuiltinPrefix, near)
	}
	return fmt.Errorf("%s: %w (%s built-ins: %s)", spec, errUnknownBuiltin, kind, strings.Join(known, ", "))
}

func isSharedLib(spec string) bool {
	return strings.HasSuffix(spec, ".so") || strings.Contains(filepath.Base(spec), ".so.")
}

// checkFile reports a missing or unusable function file.
func checkFile(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("function %s: %w", path, unwrapPathError(err))
	case st.IsDir():
		return fmt.Errorf("function %s: is a directory", path)
	}
	return nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// findProgram resolves an external program: a path if spec has a slash,
// otherwise a file in the current directory, otherwise a program in $PATH.
func findProgram(spec string) (string, error) {
	if spec == "" {
		return "", fmt.Errorf("no function given")
	}
	path := spec
	if !strings.Contains(spec, "/") {
		if _, err := os.Stat(spec); err != nil {
			found, lerr := exec.LookPath(spec)
			if lerr != nil {
				return "", fmt.Errorf("function %s: no such file in the current directory or in $PATH (built-ins are named builtin:NAME)", spec)
			}
			return found, nil
		}
		path = "./" + spec
	}
	if err := checkFile(path); err != nil {
		return "", err
	}
	st, _ := os.Stat(path)
	if st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("function %s: %w (chmod +x, or name a .so or builtin:NAME)", spec, errNotExecutable)
	}
	return path, nil
}
