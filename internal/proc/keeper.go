// Package proc runs the commands rightsize starts — Makeflow's rules, the
// local batch driver's jobs, the Work Queue worker's tasks — and keeps what
// they start from outliving them, however the program ends: a normal exit,
// a panic, or kill -9.
//
// A Cmd runs a command in a process group of its own: its output goes to
// writers or files and its tails are kept, it is stopped by SIGTERM then
// SIGKILL (Terminate, or its wall time), what it leaves in its group dies
// with it, and its Result says how it ended and what it used (rusage). The
// per-call runner of All-Pairs and Wavefront programs (package funcs) is
// leaner and registers with a Keeper the same way. Both start processes
// with Spawn: posix_spawn, which does not take Go's fork lock (Go's
// ForkExec in a build without cgo, as the Work Queue worker is built).
//
// A Keeper is a small helper process, a /bin/sh script, that a program
// starts once, at the first Reserve. It runs in a session of its own, so
// that signals sent to the program's process group (Ctrl-C, a batch
// system's kill) do not reach it, and reads a pipe from the program. When
// that pipe reaches end of file — the program called Close, exited, or died
// — it sends SIGKILL to every process group still registered, waits until
// their processes have ended (zombies count as ended), removes the
// registered directories and exits. The files given to Hold stay open in it
// until then, so that a lock on them (flock) outlives the program until
// nothing it started is left.
//
// Registering a process group costs no system call: the groups are records
// of a memory-mapped file shared with the keeper, each set and cleared by
// one atomic store; the keeper reads the file only at the end.
//
// A caller must start each process it registers as the leader of a process
// group of its own (Setpgid, POSIX_SPAWN_SETPGROUP), register it (Reserve
// before starting it, Set after) and, when it ends, kill the group or know
// it empty and Release it before reaping the leader (WaitExit waits without
// reaping). Until the leader is reaped its id, and so the group's, cannot
// be reused: the keeper never kills a group that is not the caller's.
//
// What a Keeper does not do: it does not follow a process that leaves its
// group (setsid, setpgid); a program killed while it starts a process —
// from the spawn until the process is registered, which includes the
// child's run up to exec, a few hundred microseconds — leaves that process
// behind; and a group whose processes do not end within about ten seconds
// of SIGKILL (stuck in the kernel) is given up on. It starts no processes of its own
// beyond the keeper and the commands of Cmd.
package proc

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The table of registered groups is maxSlots records of slotSize bytes: a
// group id in decimal, right-aligned in seven characters, and a newline; a
// free record is all zero bytes. The keeper reads it with
// tr -cd '0-9\n', which leaves one line per registered group. Seven digits
// hold any process id: Linux's limit is 4194304.
const (
	slotSize = 8
	maxSlots = 1 << 16
	maxPgid  = 9999999
)

// shell runs the keeper script.
const shell = "/bin/sh"

// keeperScript is the keeper: fd 0 is the pipe from the program, fd 3 the
// table of groups, fds 4 and up the held files (held by being open).
//
// Messages, one per line: "+DIR" removes DIR at the end, "-DIR" no longer,
// "." exits at once without killing anything (the program hands over to a
// new keeper). At end of file it kills, waits and removes. On Linux it
// waits until no process of the groups is left but zombies, reading every
// /proc/PID/stat (pid (comm) state ppid pgrp ...); elsewhere until the
// groups are empty (a zombie counts until its parent reaps it).
const keeperScript = `nl='
'
dirs=
while IFS= read -r m; do
	case $m in
	+?*) dirs=$dirs${m#+}$nl ;;
	-?*)
		rest=$dirs
		dirs=
		while [ -n "$rest" ]; do
			d=${rest%%"$nl"*}
			rest=${rest#*"$nl"}
			[ "$d" = "${m#-}" ] || dirs=$dirs$d$nl
		done ;;
	.) exit 0 ;;
	esac
done
groups=$(tr -cd '0-9\n' </dev/fd/3 2>/dev/null || tr -cd '0-9\n' <&3)
for g in $groups; do
	[ "$g" -gt 1 ] && kill -s KILL -- "-$g"
done 2>/dev/null
i=0
while [ -n "$groups" ] && [ "$i" -lt 120 ]; do
	if [ -r /proc/self/stat ]; then
		groups=$(cat /proc/[0-9]*/stat 2>/dev/null | G="$groups" awk '
			BEGIN { n = split(ENVIRON["G"], w); for (i = 1; i <= n; i++) want[w[i]] = 1 }
			{ s = $0; sub(/^.*\) /, "", s); split(s, f, " ")
			  if (f[1] != "Z" && f[1] != "X" && ((f[3]) in want)) live[f[3]] = 1 }
			END { for (g in live) print g }')
	else
		groups=$(for g in $groups; do kill -s 0 -- "-$g" 2>/dev/null && echo "$g"; done)
	fi
	[ -n "$groups" ] || break
	i=$((i + 1))
	if [ "$i" -le 100 ]; then t=0.01; else t=0.5; fi
	sleep $t 2>/dev/null || sleep 1
done
while [ -n "$dirs" ]; do
	d=${dirs%%"$nl"*}
	dirs=${dirs#*"$nl"}
	chmod -R u+rwx -- "$d" 2>/dev/null
	rm -rf -- "$d"
done
`

// A Keeper makes sure that the process groups and directories registered
// with it die with the program; see the package documentation. Its methods
// are safe for concurrent use. The zero value is ready to use; the keeper
// process starts at the first Reserve, MkdirTemp or AddDir. A Keeper can be
// used again after Close.
type Keeper struct {
	mu    sync.Mutex
	table *os.File // the shared table; nil until first needed
	mem   []byte   // table, mapped
	gen   uint64   // counts tables, so that a Slot of a closed one is ignored
	free  []int32  // free records below next, reused last-in first-out
	next  int32    // records at and above next have never been used
	inUse int
	held  []*os.File
	dirs  map[string]*os.File // registered directories -> their lock file (or nil)
	kp    *keeperProc         // the running keeper, nil if none
}

// keeperProc is one keeper process.
type keeperProc struct {
	p      *os.Process
	w      *os.File      // the pipe to it
	exited chan struct{} // closed when it has exited and been reaped
}

// A Slot is one registered process group, or a record reserved for one.
// The zero Slot is valid and does nothing.
type Slot struct {
	k   *Keeper
	gen uint64
	i   int32
}

// Reserve starts the keeper process if none runs and reserves a record for
// a process about to start. Call Set once it has started, and Release when
// it has ended or did not start.
func (k *Keeper) Reserve() (Slot, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.startLocked(); err != nil {
		return Slot{}, err
	}
	var i int32
	switch n := len(k.free); {
	case n > 0:
		i = k.free[n-1]
		k.free = k.free[:n-1]
	case k.next < maxSlots:
		i = k.next
		k.next++
	default:
		return Slot{}, fmt.Errorf("process keeper: more than %d processes at once", maxSlots)
	}
	k.inUse++
	return Slot{k: k, gen: k.gen, i: i}, nil
}

// Set registers pgid, the process group of the process just started (its
// process id, as it leads the group). It panics if pgid is not a possible
// process group id.
func (s Slot) Set(pgid int) {
	if pgid <= 1 || pgid > maxPgid {
		panic("proc: process group id out of range: " + strconv.Itoa(pgid))
	}
	rec := [slotSize]byte{' ', ' ', ' ', ' ', ' ', ' ', ' ', '\n'}
	for i := slotSize - 2; pgid > 0; i-- {
		rec[i] = byte('0' + pgid%10)
		pgid /= 10
	}
	s.store(binary.NativeEndian.Uint64(rec[:]))
}

// Release forgets the slot's group and frees the record. Call it once the
// group has been killed (or is known to be empty) and before its leader is
// reaped.
func (s Slot) Release() {
	if s.k == nil {
		return
	}
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen != s.gen || k.mem == nil {
		return
	}
	k.storeLocked(s.i, 0)
	k.free = append(k.free, s.i)
	k.inUse--
}

func (s Slot) store(v uint64) {
	if s.k == nil {
		return
	}
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	if s.k.gen == s.gen && s.k.mem != nil {
		s.k.storeLocked(s.i, v)
	}
}

// storeLocked writes record i in one store, so that a program killed at
// any instant leaves either the old record or the new one, never a mix.
func (k *Keeper) storeLocked(i int32, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&k.mem[int(i)*slotSize])), v)
}

// Hold makes the keeper hold files open (replacing those of an earlier
// call) until it exits, so that a lock on them lasts, after the program's
// death, until every registered group is gone. If a keeper process runs,
// it is replaced by one that holds the new set; Hold() with no files
// releases the old set. The caller keeps its own copies open or closes
// them as it likes.
func (k *Keeper) Hold(files ...*os.File) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held = append([]*os.File(nil), files...)
	old := k.kp
	if old == nil {
		return nil
	}
	k.kp = nil
	if k.inUse > 0 || len(k.dirs) > 0 {
		// Something is registered: the new keeper must be there before
		// the old one leaves. (Should the program die in between, both
		// kill the same groups.)
		if err := k.startLocked(); err != nil {
			k.kp = old
			return err
		}
	}
	io.WriteString(old.w, ".\n")
	old.stop()
	return nil
}

// Close ends the keeper process as if the program had died: it kills the
// groups still registered, removes the directories still registered, and
// exits; Close waits for that. The caller's own copies of held files stay
// open.
func (k *Keeper) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kp != nil {
		k.kp.stop()
		k.kp = nil
	}
	for dir, lock := range k.dirs {
		os.RemoveAll(dir) // if the keeper could not
		if lock != nil {
			lock.Close()
		}
	}
	k.dirs = nil
	var err error
	if k.mem != nil {
		err = unix.Munmap(k.mem)
		k.table.Close()
		k.mem, k.table = nil, nil
		k.free, k.next, k.inUse = nil, 0, 0
		k.gen++
	}
	return err
}

// startLocked starts a keeper process unless one runs.
func (k *Keeper) startLocked() error {
	if k.kp != nil {
		select {
		case <-k.kp.exited:
			// Killed by someone: start another, which reads the same
			// table.
			k.kp.w.Close()
			k.kp = nil
		default:
			return nil
		}
	}
	if k.mem == nil {
		if err := k.newTable(); err != nil {
			return fmt.Errorf("process keeper: %w", err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("process keeper: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path: shell,
		Args: []string{"rightsize-keeper", "-c", keeperScript},
		Dir:  "/",
		Env:  keeperEnv(),
		// Files the keeper reads and holds.
		Stdin:      r,
		ExtraFiles: append([]*os.File{k.table}, k.held...),
		// Out of the program's session and process group, so that no
		// signal meant for them reaches the keeper.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("process keeper: %w", err)
	}
	kp := &keeperProc{p: cmd.Process, w: w, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(kp.exited)
	}()
	for dir := range k.dirs {
		io.WriteString(w, "+"+dir+"\n")
	}
	k.kp = kp
	return nil
}

// stop closes the pipe to a keeper and waits for it to exit.
func (kp *keeperProc) stop() {
	kp.w.Close()
	<-kp.exited
}

// newTable creates and maps the table of groups.
func (k *Keeper) newTable() error {
	f, err := newTableFile()
	if err != nil {
		return err
	}
	if err := f.Truncate(maxSlots * slotSize); err != nil {
		f.Close()
		return err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, maxSlots*slotSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return err
	}
	k.table, k.mem = f, mem
	return nil
}

// newTableFile returns an empty file that no other process can open by
// name: a memfd, or failing that an unlinked temporary file.
func newTableFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("rightsize-keeper", unix.MFD_CLOEXEC)
	if err == nil {
		return os.NewFile(uintptr(fd), "rightsize-keeper"), nil
	}
	f, err := os.CreateTemp("", "rightsize-keeper-")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// keeperEnv is the keeper's environment: the program's PATH, to find the
// few commands it runs at the end (tr, cat, awk, sleep, rm), and the C
// locale.
func keeperEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "LC_ALL=C"}
}
