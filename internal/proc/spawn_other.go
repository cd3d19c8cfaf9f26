//go:build !cgo || !linux

package proc

// spawn starts the process through syscall.ForkExec: without cgo there is
// no posix_spawn to call.
func spawn(path string, argv []string, attr *SpawnAttr) (int, error) {
	return forkExec(path, argv, attr)
}
