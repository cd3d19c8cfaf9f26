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
// Commands started with a Loop are waited for together, as make's SIGCHLD
// loop waits for its children: one goroutine and one epoll instance for
// all of them, and no goroutine or blocked thread per command (Makeflow's
// local executor runs every rule in one).
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
// before starting it, then Spawn with the Slot, which registers it once
// started) and, when it ends, kill the group or know it empty and Release
// it before reaping the leader (WaitExit waits without reaping). Until the
// leader is reaped its id, and so the group's, cannot be reused: the
// keeper never kills a group that is not the caller's.
//
// A program killed while it starts a process, after the spawn and before
// the process is registered (a few hundred microseconds, the child's run
// up to exec included), does not leave that process behind either, on
// Linux: Reserve marks the record as reserved, under a number, and Spawn
// gives the process that number in its environment (RIGHTSIZE_KEEPER,
// which names the table too); the keeper kills the processes holding the
// number of a record still reserved, and their groups. It looks only once
// every process being started has exec'd: each holds a copy of the pipe to
// the keeper until then. This costs a caller the variable written among
// the strings given to posix_spawn (a copy of the environment's list only
// for this process's environment, or without cgo), a new keeper process
// every million reservations (so that no mark is given twice: see
// markVar), and the keeper a search of /proc/PID/environ at the end, when
// a record is still reserved.
//
// What a Keeper does not do: it does not follow a process that leaves its
// group (setsid, setpgid), unless it carries the mark of a record still
// reserved; elsewhere than on Linux, or for a process started otherwise
// than with Spawn and registered with Set, a program killed between the
// spawn and the registration leaves the process behind; and a group whose
// processes do not end within about ten seconds of SIGKILL (stuck in the
// kernel) is given up on. It starts no processes of its own beyond the
// keeper and the commands of Cmd.
package proc

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
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
// group id in decimal, right-aligned in seven characters, and a newline; or
// for a record reserved and not yet set, 'p', the number of its mark (see
// markVar) in six digits, and a newline; a free record is all zero bytes.
// The keeper reads it with tr -cd '0-9p\n', which leaves one line per
// record in use. Seven digits hold any process id: Linux's limit is
// 4194304.
const (
	slotSize = 8
	maxSlots = 1 << 16
	maxPgid  = 9999999
	maxMarks = 1000000 // marks per token: the six digits' numbers
)

// markVar is the environment variable that marks a process Spawn starts
// for a reserved record: markVar=TOKEN.NNNNNN, TOKEN naming the table (the
// keeper gets markVar=TOKEN as its argument) and NNNNNN the record's mark
// number. A program killed between the spawn and Set leaves the record
// reserved, and the keeper kills the processes whose environment holds its
// mark.
//
// No mark is given twice: a process keeps its mark long after its record
// is set, and so do its descendants, some of which may have left its group
// (a daemon) and must not be taken for the process of a later record
// reserved under the same mark. When a token's numbers are used up, the
// Keeper takes a new token, and a new keeper process that looks for it
// takes over (newTokenLocked).
const markVar = "RIGHTSIZE_KEEPER"

// shell runs the keeper script.
const shell = "/bin/sh"

// keeperScript is the keeper: fd 0 is the pipe from the program, fd 3 the
// table of groups, fds 4 and up the held files (held by being open), $1
// the marks' prefix, markVar=TOKEN.
//
// Messages, one per line: "+DIR" removes DIR at the end, "-DIR" no longer,
// "." exits at once without killing anything (the program hands over to a
// new keeper). At end of file it kills, waits and removes.
//
// End of file comes only once every process being spawned has exec'd (or
// died): until then it holds a copy of the pipe's write end (close on
// exec, but its copy of the program's descriptors), so a process spawned
// for a reserved record has its mark in /proc/PID/environ by then. On
// Linux the keeper looks for those marks (grep -z, until none is found or
// five times, so as to catch what a marked process forks meanwhile) and
// kills each marked process, and its group if it leads one. It waits
// until no process of the groups is left but zombies, reading every
// /proc/PID/stat (pid (comm) state ppid pgrp ...); elsewhere until the
// groups are empty (a zombie counts until its parent reaps it).
const keeperScript = `mark=$1
nl='
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
table=$(tr -cd '0-9p\n' </dev/fd/3 2>/dev/null || tr -cd '0-9p\n' <&3)
groups=
set --
for r in $table; do
	case $r in
	p*) set -- "$@" -e "$mark.${r#p}" ;;
	*) groups="$groups $r" ;;
	esac
done
for g in $groups; do
	[ "$g" -gt 1 ] && kill -s KILL -- "-$g"
done 2>/dev/null
n=0
while [ $# -gt 0 ] && [ "$n" -lt 5 ] && [ -r /proc/self/environ ]; do
	found=$(grep -l -a -z -x -F "$@" /proc/[0-9]*/environ 2>/dev/null)
	[ -n "$found" ] || break
	for f in $found; do
		p=${f#/proc/}
		p=${p%/environ}
		s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		pg=$(echo "${s##*) }" | cut -d' ' -f3)
		if [ "$pg" = "$p" ]; then
			kill -s KILL -- "-$p" && groups="$groups $p"
		else
			kill -s KILL "$p"
		fi
	done 2>/dev/null
	n=$((n + 1))
done
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
	token string   // markVar=TOKEN, naming the table in marks
	marks int32    // the next mark number under token; maxMarks: none left
	free  []int32  // free records below next, reused last-in first-out
	next  int32    // records at and above next have never been used
	inUse int
	held  []*os.File
	dirs  map[string]*os.File // registered directories -> their lock file (or nil)
	kp    *keeperProc         // the running keeper, nil if none

	// pending counts the records reserved and not yet set or released:
	// spawns that may be under way. Hold waits for none, with handing
	// set so that Reserve waits meanwhile; idle (on mu) says when
	// either changes.
	pending int
	handing bool
	idle    sync.Cond
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
	k     *Keeper
	gen   uint64
	i     int32
	mark  int32  // its mark's number
	token string // markVar=TOKEN, the table's
}

// markDigits is the length of a mark's number in an environment entry,
// its dot included.
const markDigits = 7

// digits returns the slot's mark number as it ends its environment entry:
// ".NNNNNN".
func (s Slot) digits() [markDigits]byte {
	digits := [markDigits]byte{'.', '0', '0', '0', '0', '0', '0'}
	for i, n := len(digits)-1, s.mark; n > 0; i-- {
		digits[i] = byte('0' + n%10)
		n /= 10
	}
	return digits
}

// markEntry returns the environment entry that marks the slot's process,
// markVar=TOKEN.NNNNNN, or "" for the zero Slot.
func (s Slot) markEntry() string {
	if s.token == "" {
		return ""
	}
	digits := s.digits()
	return s.token + string(digits[:])
}

// Reserve starts the keeper process if none runs and reserves a record for
// a process about to start. Start the process with Spawn, giving it the
// Slot (SpawnAttr.Slot), which marks the process so that the keeper finds
// it should the program die before Spawn has registered it, and registers
// it. Call Release when it has ended or did not start. (A process started
// otherwise is registered with Set once started, and is left behind by a
// program killed in between.) Hold waits for the Slots reserved and not
// yet set or released, so set or release each soon.
func (k *Keeper) Reserve() (Slot, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.handing {
		k.waitLocked()
	}
	if err := k.startLocked(); err != nil {
		return Slot{}, err
	}
	if k.marks == maxMarks {
		if err := k.newTokenLocked(); err != nil {
			return Slot{}, err
		}
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
	// The record says "reserved" with the mark's number before the
	// process can exist.
	mark := k.marks
	k.marks++
	rec := [slotSize]byte{'p', '0', '0', '0', '0', '0', '0', '\n'}
	for j, n := slotSize-2, mark; n > 0; j-- {
		rec[j] = byte('0' + n%10)
		n /= 10
	}
	k.storeLocked(i, binary.NativeEndian.Uint64(rec[:]))
	k.pending++
	return Slot{k: k, gen: k.gen, i: i, mark: mark, token: k.token}, nil
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

// waitLocked waits, holding k.mu, until pending or handing changes.
func (k *Keeper) waitLocked() {
	if k.idle.L == nil {
		k.idle.L = &k.mu
	}
	k.idle.Wait()
}

// storeLocked writes record i in one store, so that a program killed at
// any instant leaves either the old record or the new one, never a mix.
// Overwriting a reserved record ends a pending spawn.
func (k *Keeper) storeLocked(i int32, v uint64) {
	if k.mem[int(i)*slotSize] == 'p' {
		k.pending--
		if k.pending == 0 && k.handing {
			k.idle.Broadcast()
		}
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&k.mem[int(i)*slotSize])), v)
}

// Hold makes the keeper hold files open (replacing those of an earlier
// call) until it exits, so that a lock on them lasts, after the program's
// death, until every registered group is gone. If a keeper process runs,
// it is replaced by one that holds the new set; Hold() with no files
// releases the old set. The caller keeps its own copies open or closes
// them as it likes.
//
// While a keeper process runs, Hold first waits for the spawns under way
// (Slots reserved and not yet set or released) to end, and has Reserve wait
// until it is done: a process being spawned has a copy of the pipe to the
// old keeper and not of the one to the new keeper, which could otherwise
// read the table, should the program die, before that process has its
// mark in place.
func (k *Keeper) Hold(files ...*os.File) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held = append([]*os.File(nil), files...)
	if k.kp == nil {
		return nil
	}
	return k.handOverLocked("")
}

// handOverLocked starts a new keeper process, holding the files of
// k.held and looking for the marks of token (unless it is "", which keeps
// the table's token; a new token numbers marks from 0 again), and ends
// the old one without its killing anything. It first waits for the spawns
// under way to end, and has Reserve wait until it is done: a process being
// spawned has a copy of the pipe to the old keeper and not of the one to
// the new keeper, which could otherwise read the table, should the program
// die, before that process has its mark in place; and its mark is under
// the old token.
func (k *Keeper) handOverLocked(token string) error {
	for k.handing {
		k.waitLocked()
	}
	k.handing = true
	for k.pending > 0 {
		k.waitLocked()
	}
	defer func() {
		k.handing = false
		k.idle.Broadcast()
	}()
	oldToken, oldMarks := k.token, k.marks
	if token != "" {
		k.token, k.marks = token, 0
	}
	old := k.kp
	if old == nil {
		// Closed while this waited, or left with nothing to keep by an
		// earlier Hold: no keeper looks for the old token's marks.
		return nil
	}
	k.kp = nil
	if k.inUse > 0 || len(k.dirs) > 0 || token != "" {
		// Something is registered, or a Reserve needs the keeper: the
		// new keeper must be there before the old one leaves. (Should
		// the program die in between, both kill the same groups.)
		if err := k.startLocked(); err != nil {
			k.kp = old
			k.token, k.marks = oldToken, oldMarks
			return err
		}
	}
	io.WriteString(old.w, ".\n")
	old.stop()
	return nil
}

// newTokenLocked gives the table a new token, and so mark numbers from 0
// again, once the old token's are used up (see markVar), and makes sure a
// keeper process runs. The keeper process is told the token it looks for
// when it starts, so a new one takes over.
func (k *Keeper) newTokenLocked() error {
	token, err := newToken()
	if err != nil {
		return fmt.Errorf("process keeper: %w", err)
	}
	if err := k.handOverLocked(token); err != nil {
		return err
	}
	return k.startLocked()
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
		k.free, k.next, k.inUse, k.pending = nil, 0, 0, 0
		k.gen++
		k.idle.Broadcast()
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
		Args: []string{"rightsize-keeper", "-c", keeperScript, "rightsize-keeper", k.token},
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
	token, err := newToken()
	if err != nil {
		unix.Munmap(mem)
		f.Close()
		return err
	}
	k.table, k.mem = f, mem
	k.token, k.marks = token, 0
	return nil
}

// newToken returns a new markVar=TOKEN, TOKEN random.
func newToken() (string, error) {
	var token [8]byte
	if _, err := rand.Read(token[:]); err != nil {
		return "", err
	}
	return markVar + "=" + hex.EncodeToString(token[:]), nil
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
