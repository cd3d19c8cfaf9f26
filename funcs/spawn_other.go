//go:build !cgo || !linux

package funcs

import (
	"os"
	"syscall"
)

// spawn starts argv[0] with argv in its own process group and returns its
// process id. Without cgo it uses syscall.ForkExec.
func spawn(argv []string, stdin, stdout, stderr *os.File) (int, error) {
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{stdin.Fd(), stdout.Fd(), stderr.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, &os.PathError{Op: "exec", Path: argv[0], Err: err}
	}
	return pid, nil
}
