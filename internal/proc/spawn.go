package proc

import (
	"errors"
	"os"
	"syscall"
)

// SpawnAttr is how Spawn starts a process.
type SpawnAttr struct {
	// Dir is the working directory; "" is this process's. A relative path
	// to the executable is resolved in it.
	Dir string
	// Env is the whole environment; nil is this process's.
	Env []string
	// Files are the process's standard input, output and error, in that
	// order; none may be nil. Nothing else is inherited: Go opens every
	// descriptor close-on-exec.
	Files [3]*os.File
	// Slot, unless it is the zero Slot, is the Keeper record reserved for
	// the process (Keeper.Reserve). Spawn registers the process with it
	// (Slot.Set) once started, and marks the process beforehand so that
	// the keeper still finds and kills it should this program die in
	// between: the mark is a variable in its environment,
	// RIGHTSIZE_KEEPER, which replaces any of that name in Env.
	Slot Slot
}

// Spawn starts the executable at path with arguments argv (argv[0]
// included) as the leader of a process group of its own, and returns its
// process id. The caller must reap it (syscall.Wait4, or WaitExit first to
// signal the group safely until then).
//
// With cgo on glibc it uses posix_spawn, whose vfork-style clone is as
// cheap as process creation gets and which, unlike os.StartProcess, does
// not hold Go's global fork lock, so that several goroutines start
// processes at once; Dir is then set with
// posix_spawn_file_actions_addchdir_np (glibc 2.29 or later). Elsewhere,
// and for Dir on an older C library, it uses syscall.ForkExec.
//
// When Spawn returns, the process is in its group and has its descriptors
// and directory: a signal to its group reaches it. No parent-death signal
// is set (posix_spawn has none; Go's fires when the starting thread ends,
// not the program): a Keeper is what kills the group should this program
// die.
//
// Errors are *os.PathError for path, or for Dir if it is not a directory
// that can be entered.
func Spawn(path string, argv []string, attr *SpawnAttr) (int, error) {
	return spawnWith(spawn, path, argv, attr)
}

// spawnWith is Spawn starting the process with start: spawn, or forkExec
// for the tests of a build without cgo. Each puts attr.Slot's mark into
// the environment it gives the process.
func spawnWith(start func(path string, argv []string, attr *SpawnAttr) (int, error),
	path string, argv []string, attr *SpawnAttr) (int, error) {
	for _, f := range attr.Files {
		if f == nil {
			return 0, &os.PathError{Op: "fork/exec", Path: path, Err: errors.New("missing standard file")}
		}
	}
	pid, err := start(path, argv, attr)
	if err == nil {
		attr.Slot.Set(pid)
		return pid, nil
	}
	if attr.Dir != "" && (err == syscall.ENOENT || err == syscall.ENOTDIR || err == syscall.EACCES) {
		// Say which of the two was missing: the directory or the program.
		if st, serr := os.Stat(attr.Dir); serr != nil {
			return 0, &os.PathError{Op: "chdir", Path: attr.Dir, Err: err}
		} else if !st.IsDir() {
			return 0, &os.PathError{Op: "chdir", Path: attr.Dir, Err: syscall.ENOTDIR}
		}
	}
	return 0, &os.PathError{Op: "fork/exec", Path: path, Err: err}
}

// withMark returns env (nil: this process's environment) with mark, a
// markVar=VALUE entry, in place of any markVar entry: a copy, as the
// caller's slice may be shared. Only forkExec needs it: spawn writes the
// mark among the strings it hands to posix_spawn.
func withMark(env []string, mark string) []string {
	if env == nil {
		env = os.Environ()
	}
	marked := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !isMark(kv) {
			marked = append(marked, kv)
		}
	}
	return append(marked, mark)
}

// isMark reports whether environment entry kv is a markVar entry.
func isMark(kv string) bool {
	return len(kv) > len(markVar) && kv[len(markVar)] == '=' && kv[:len(markVar)] == markVar
}

// forkExec is Spawn through syscall.ForkExec, which holds Go's fork lock.
func forkExec(path string, argv []string, attr *SpawnAttr) (int, error) {
	env := attr.Env
	if mark := attr.Slot.markEntry(); mark != "" {
		env = withMark(env, mark)
	} else if env == nil {
		env = os.Environ()
	}
	return syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   attr.Dir,
		Env:   env,
		Files: []uintptr{attr.Files[0].Fd(), attr.Files[1].Fd(), attr.Files[2].Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
}
