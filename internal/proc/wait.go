package proc

import "golang.org/x/sys/unix"

// WaitExit waits until process pid has exited, without reaping it. Until
// it is reaped its id, and so the id of the process group it leads, cannot
// be given to another process: the group can still be signalled, and
// Released, safely.
func WaitExit(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}
