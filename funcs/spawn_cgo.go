//go:build cgo && linux

package funcs

/*
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>

extern char **environ;

// spawn starts path with argv in a new process group, with the given
// descriptors as its standard input, output and error. glibc's posix_spawn
// uses a vfork-style clone, so it is as cheap as process creation gets; and,
// unlike os.StartProcess, it does not hold Go's global fork lock, so that
// several cores can start processes at once. It is safe because Go opens
// every descriptor close-on-exec: the child inherits only these three.
static int spawn(pid_t *pid, const char *path, char *const argv[], int in, int out, int err) {
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
	    (r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK)) == 0)
		r = posix_spawn(pid, path, &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return r;
}
*/
import "C"

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// spawn starts argv[0] with argv in its own process group and returns its
// process id.
func spawn(argv []string, stdin, stdout, stderr *os.File) (int, error) {
	cargv := make([]*C.char, len(argv)+1)
	for i, a := range argv {
		cargv[i] = C.CString(a)
	}
	defer func() {
		for _, p := range cargv[:len(argv)] {
			C.free(unsafe.Pointer(p))
		}
	}()
	// The array of C pointers lives in C memory: cgo forbids passing Go
	// memory that holds pointers.
	arr := (*[1 << 20]*C.char)(C.malloc(C.size_t(len(cargv)) * C.size_t(unsafe.Sizeof(cargv[0]))))
	defer C.free(unsafe.Pointer(arr))
	copy(arr[:len(cargv)], cargv)

	var pid C.pid_t
	r := C.spawn(&pid, cargv[0], &arr[0], C.int(stdin.Fd()), C.int(stdout.Fd()), C.int(stderr.Fd()))
	runtime.KeepAlive(stdin)
	runtime.KeepAlive(stdout)
	runtime.KeepAlive(stderr)
	if r != 0 {
		return 0, &os.PathError{Op: "exec", Path: argv[0], Err: syscall.Errno(r)}
	}
	return int(pid), nil
}
