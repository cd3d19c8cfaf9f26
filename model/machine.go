package model

import (
	"fmt"
	"runtime"
	"syscall"
)

// Machine is what a probe finds of this machine: what an engine, a Work
// Queue worker or Makeflow's local executor may use of it.
type Machine struct {
	Cores      int   // logical CPUs
	MemoryMB   int64 // physical memory in all
	DiskMB     int64 // free space for this user on the probed file system
	CacheBytes int64 // the largest processor cache (see CacheBytes)
}

// Probe reads this machine: its CPUs, its memory, the free space of the
// file system holding dir, and its processor cache. Memory and cache it
// cannot read are left 0 and 8 MiB; a dir it cannot look at is an error
// (with the rest filled in), and an empty dir skips the disk.
func Probe(dir string) (Machine, error) {
	m := Machine{Cores: runtime.NumCPU(), CacheBytes: CacheBytes()}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		m.MemoryMB = int64(si.Totalram) * int64(si.Unit) >> 20
	}
	if dir == "" {
		return m, nil
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return m, fmt.Errorf("free space of %s: %w", dir, err)
	}
	m.DiskMB = int64(fs.Bavail) * fs.Bsize >> 20
	return m, nil
}
