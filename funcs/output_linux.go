package funcs

import (
	"os"

	"golang.org/x/sys/unix"
)

// openOutput opens a file for a call's output: an anonymous memory file,
// whose writes and truncations touch no disk and no journal, or, where the
// kernel has none, an unlinked temporary file in dir.
func openOutput(dir string) (*os.File, error) {
	fd, err := unix.MemfdCreate("rightsize-out", unix.MFD_CLOEXEC)
	if err != nil {
		return openAppendTemp(dir)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_APPEND); err != nil {
		unix.Close(fd)
		return openAppendTemp(dir)
	}
	return os.NewFile(uintptr(fd), "rightsize-out"), nil
}
