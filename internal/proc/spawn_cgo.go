//go:build cgo && linux

package proc

/*
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdlib.h>

extern char **environ;

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29))
#define RS_HAVE_ADDCHDIR 1
#else
#define RS_HAVE_ADDCHDIR 0
#endif

// rs_handled_signals fills set with the signals that have a handler in
// this process, those a child must not run before it execs, and glibc's
// internal signals (below SIGRTMIN), which the child would otherwise
// ignore and pass on ignored to the program it execs.
static void rs_handled_signals(sigset_t *set) {
	struct sigaction sa;
	sigemptyset(set);
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig >= 32 && sig < SIGRTMIN) {
			// sigaddset refuses these; the set is a bit array.
			unsigned long *bits = (unsigned long *)set;
			bits[(sig - 1) / (8 * sizeof *bits)] |= 1UL << ((sig - 1) % (8 * sizeof *bits));
			continue;
		}
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL)
			sigaddset(set, sig);
	}
}

// rs_spawn starts path in a new process group with in, out and err as its
// descriptors 0, 1 and 2, in directory dir unless it is NULL, with
// environment envp (NULL: environ). glibc's adddup2 of a descriptor onto
// itself clears its close-on-exec flag (2.29 and later), so a descriptor
// already in place is inherited too. The signal mask is emptied: Go blocks
// signals on some threads.
//
// The child resets the signals in handled to their default action before
// it execs: a handler of this process must not run in the child, which
// shares its memory until then. Without that set glibc looks at every
// signal in the child, two system calls each where a handler is set; Go
// sets one for nearly all, so the set halves the child's work before exec
// (130 system calls to 74).
static int rs_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[],
		const char *dir, int in, int out, int err, const sigset_t *handled) {
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none;
	int r;

	if ((r = posix_spawn_file_actions_init(&fa)) != 0)
		return r;
	if ((r = posix_spawnattr_init(&at)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return r;
	}
	sigemptyset(&none);
	if ((r = posix_spawn_file_actions_adddup2(&fa, in, 0)) == 0 &&
	    (r = posix_spawn_file_actions_adddup2(&fa, out, 1)) == 0 &&
	    (r = posix_spawn_file_actions_adddup2(&fa, err, 2)) == 0 &&
	    (r = posix_spawnattr_setpgroup(&at, 0)) == 0 &&
	    (r = posix_spawnattr_setsigmask(&at, &none)) == 0 &&
	    (r = posix_spawnattr_setsigdefault(&at, handled)) == 0 &&
	    (r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0) {
		if (dir != NULL) {
#if RS_HAVE_ADDCHDIR
			r = posix_spawn_file_actions_addchdir_np(&fa, dir);
#else
			r = ENOSYS;
#endif
		}
		if (r == 0)
			r = posix_spawn(pid, path, &fa, &at, argv, envp != NULL ? envp : environ);
	}
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return r;
}
*/
import "C"

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// handledSignals is the set of signals with a handler in this process,
// looked at once, at the first spawn: Go installs its handlers at start.
// (A signal ignored later, by signal.Ignore, would be reset to its default
// action in the children rather than stay ignored; nothing here does that.)
var handledSignals = sync.OnceValue(func() *C.sigset_t {
	set := (*C.sigset_t)(C.malloc(C.size_t(unsafe.Sizeof(C.sigset_t{}))))
	C.rs_handled_signals(set)
	return set
})

// spawn starts the process with posix_spawn, or with forkExec for a
// directory this C library cannot set.
func spawn(path string, argv []string, attr *SpawnAttr) (int, error) {
	if attr.Dir != "" && C.RS_HAVE_ADDCHDIR == 0 {
		return forkExec(path, argv, attr)
	}
	var fds [3]int
	for i, f := range attr.Files {
		fds[i] = int(f.Fd())
	}
	// A source descriptor below 3 that is not already in its place would
	// be overwritten by an earlier dup2 (stdout given as the child's
	// stderr and the other way round): move it out of the way first.
	for i, fd := range fds {
		if fd < 3 && fd != i {
			moved, err := dupCloexec(fd)
			if err != nil {
				return 0, err
			}
			defer syscall.Close(moved)
			fds[i] = moved
		}
	}

	dir := attr.Dir
	if dir == "." {
		dir = "" // a chdir that changes nothing is a system call saved
	}
	block := newCStrings(path, dir, argv, attr.Env, attr.Slot)
	defer C.free(block.mem)
	var pid C.pid_t
	r := C.rs_spawn(&pid, block.path, block.argv, block.envp, block.dir,
		C.int(fds[0]), C.int(fds[1]), C.int(fds[2]), handledSignals())
	runtime.KeepAlive(attr)
	if r != 0 {
		return 0, syscall.Errno(r)
	}
	return int(pid), nil
}

func dupCloexec(fd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 3)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// cStrings are the C strings and pointer arrays of one spawn, all in one
// C allocation: C may not be given Go memory that holds Go pointers, and
// one malloc costs less than one per string. The environment's strings
// are copied there anyway, so the mark is written there too, in place of
// any markVar entry, rather than into a Go copy of the environment.
type cStrings struct {
	mem       unsafe.Pointer
	path, dir *C.char // dir is nil for ""
	argv      **C.char
	envp      **C.char // nil for a nil environment
}

func newCStrings(path, dir string, argv, env []string, mark Slot) cStrings {
	marked := mark.token != ""
	if marked && env == nil {
		env = os.Environ()
	}
	nptr := len(argv) + 1
	if env != nil {
		nptr += len(env) + 1
	}
	if marked {
		nptr++ // one more than needed if env has a mark to replace
	}
	size := len(path) + 1 + len(dir) + 1
	for _, s := range argv {
		size += len(s) + 1
	}
	for _, s := range env {
		size += len(s) + 1
	}
	if marked {
		size += len(mark.token) + markDigits + 1
	}
	ptrSize := int(unsafe.Sizeof((*C.char)(nil)))
	mem := C.malloc(C.size_t(nptr*ptrSize + size))
	ptrs := unsafe.Slice((**C.char)(mem), nptr)
	bytes := unsafe.Slice((*byte)(unsafe.Add(mem, nptr*ptrSize)), size)
	off := 0
	put := func(s ...string) *C.char {
		p := (*C.char)(unsafe.Pointer(&bytes[off]))
		for _, s := range s {
			off += copy(bytes[off:], s)
		}
		bytes[off] = 0
		off++
		return p
	}
	cs := cStrings{mem: mem, path: put(path)}
	if dir != "" {
		cs.dir = put(dir)
	}
	for i, s := range argv {
		ptrs[i] = put(s)
	}
	ptrs[len(argv)] = nil
	cs.argv = &ptrs[0]
	if env != nil {
		envPtrs := ptrs[len(argv)+1:]
		n := 0
		for _, s := range env {
			if !marked || !isMark(s) {
				envPtrs[n] = put(s)
				n++
			}
		}
		if marked {
			digits := mark.digits()
			envPtrs[n] = put(mark.token, string(digits[:]))
			n++
		}
		envPtrs[n] = nil
		cs.envp = &envPtrs[0]
	}
	return cs
}

// spawnStrings builds and frees what spawn gives posix_spawn for attr:
// BenchmarkMark's measure of what a spawn costs this process before the
// system call.
func spawnStrings(path string, argv []string, attr *SpawnAttr) {
	C.free(newCStrings(path, attr.Dir, argv, attr.Env, attr.Slot).mem)
}
