package distmaster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/funcs"
)

// Function is the user's function as a block job names it on the worker.
type Function struct {
	// Spec is the name the function was opened with: builtin:NAME, a
	// program or a .so.
	Spec string
	// Path is the program or library file that is shipped with every job
	// (cached), or "" for a built-in, which is part of the program itself.
	Path string
	// ExtraArgs is the command line's -e string, passed on as it is.
	ExtraArgs string
	// Timeout bounds each call on the worker; zero means none.
	Timeout time.Duration
}

// FunctionOf describes an opened function for block jobs.
func FunctionOf(info funcs.Info, extraArgs string, timeout time.Duration) Function {
	return Function{Spec: info.Name, Path: info.Path, ExtraArgs: extraArgs, Timeout: timeout}
}

// jobFiles places the files every block job needs — the program and the
// function — and returns how the command names them. A job that ships
// files (Work Queue) gets them cached under plain names in its sandbox;
// one on a shared filesystem names them by absolute path.
type jobFiles struct {
	ship    bool
	program string // absolute path of the program run in sub-problem mode
}

// base returns what every block job starts with: the inputs it reads
// whatever its block (the program and the function's file), the command's
// first words (the program and the function's flags), and the name the
// command gives the function, which goes before the block's inputs.
func (jf jobFiles) base(f Function) (inputs []batch.File, head []string, fn string, err error) {
	program := jf.program
	if jf.ship {
		remote := plainName(filepath.Base(jf.program))
		inputs = append(inputs, batch.File{Path: jf.program, Remote: remote, Cache: true})
		program = "./" + remote
	} else {
		inputs = append(inputs, batch.File{Path: jf.program})
	}
	head = []string{program}
	if f.ExtraArgs != "" {
		head = append(head, "-e", f.ExtraArgs)
	}
	if f.Timeout > 0 {
		head = append(head, "--timeout", f.Timeout.String())
	}
	fn = f.Spec
	if f.Path == "" {
		return inputs, head, fn, nil
	}
	abs, err := filepath.Abs(f.Path)
	if err != nil {
		return nil, nil, "", err
	}
	if !jf.ship {
		return append(inputs, batch.File{Path: abs}), head, abs, nil
	}
	// In a directory of its own, so that its name cannot collide with the
	// program or the block's files, and with a slash, so that it is taken
	// for a path and never looked up in $PATH.
	fn = "fn/" + plainName(filepath.Base(abs))
	return append(inputs, batch.File{Path: abs, Remote: fn, Cache: true}), head, fn, nil
}

// newJobFiles returns the job files for program (default: this executable).
func newJobFiles(d batch.Driver, program string) (jobFiles, error) {
	if program == "" {
		exe, err := os.Executable()
		if err != nil {
			return jobFiles{}, fmt.Errorf("find this program to run it on workers: %w", err)
		}
		program = exe
	}
	abs, err := filepath.Abs(program)
	if err != nil {
		return jobFiles{}, err
	}
	if _, err := os.Stat(abs); err != nil {
		return jobFiles{}, fmt.Errorf("the program to run on workers: %w", err)
	}
	return jobFiles{ship: batch.ShipsFiles(d), program: abs}, nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandLine joins words into a /bin/sh command line.
func commandLine(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// plainName keeps a file name to letters, digits, '.', '-' and '_', so that
// it is safe in a sandbox, a set list and a Work Queue message alike.
func plainName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}
