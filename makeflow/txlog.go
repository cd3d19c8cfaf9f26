package makeflow

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The transaction log, <workflow>.makeflowlog, in CCTools' line format:
//
//	<µs> <rule> <state> <jobid> <waiting> <running> <complete> <failed> <aborted> <total>
//	# FILE <µs> <name> <filestate> <size>
//	# STARTED <µs>, # COMPLETED <µs>, # FAILED <µs>, # ABORTED <µs>
//
// Lines are appended through a buffer that Run flushes after every batch of
// events, before it starts any job: the completion of every rule a job
// depends on is in the file (the kernel's, which survives a kill -9) before
// the job starts. The file is also fsynced at the start and end of a run
// and every minute, against losing the machine.

// File states in the log.
const (
	fileExpect = 1 // a running rule will make it
	fileExists = 2 // made, with its real size
)

// defaultExpectSize is what CCTools logs for an expected file of unknown
// size (1 GiB).
const defaultExpectSize = 1 << 30

// syncEvery is how often a long run fsyncs its log.
const syncEvery = time.Minute

type logWriter struct {
	f        *os.File
	w        *bufio.Writer
	buf      []byte
	lastSync time.Time
	err      error // first write error; sticky
	// release, if set, makes the executor's keeper let go of the lock
	// (see lockHolder).
	release func() error
}

// A lockHolder is an executor whose jobs could outlive a killed makeflow
// (Local). It has them killed should this process die, and holdLock makes
// the process that does so hold the log's lock until they are gone, so
// that a re-run cannot start a rule while its previous instance runs.
type lockHolder interface {
	holdLock(f *os.File) (release func() error, err error)
}

// lockWait bounds how long openLog waits for the keeper of a dead
// makeflow to release the lock; it gives up on processes that do not end
// well before.
const lockWait = 30 * time.Second

// openLog opens the log for appending and locks it (openLocked), so that
// two runs of one workflow cannot interleave their records, and no clean
// removes what a run is making. The lock goes with the process, also when
// it is killed, but then to the keeper of its jobs (lockHolder) until they
// are gone: if the process that took the lock has died, lockLog waits for
// that.
func openLog(path string) (*logWriter, error) {
	f, err := openLocked(path, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return nil, err
	}
	return &logWriter{f: f, w: bufio.NewWriterSize(f, 64<<10), lastSync: time.Now()}, nil
}

// lockLog takes the exclusive lock of the log f, opened from path. If
// a live process holds it, it returns a *LockedError at once; if the
// makeflow that took it has died, its keeper holds the lock until the
// rules it started are gone, and lockLog waits for that, up to lockWait.
func lockLog(f *os.File, path string) error {
	deadline := time.Now().Add(lockWait)
	pause := time.Millisecond
	for unknown := 0; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock log %s: %w", path, err)
		}
		pid := lockOwner(f)
		if pid == 0 {
			// No owner in /proc/locks: the lock may have been released
			// between the two looks (a keeper that just finished), so
			// look again before calling it held.
			unknown++
		}
		switch {
		case (pid == 0 && unknown >= 3) || (pid != 0 && processAlive(pid)):
			return &LockedError{Path: path, Holders: lockHolders(path)}
		case time.Now().After(deadline):
			return fmt.Errorf("%s is still locked %v after the makeflow that locked it (pid %d) died: processes it started have not ended", path, lockWait, pid)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// lockOwner returns the process that took the flock lock on f, from
// /proc/locks, or 0 if it cannot tell.
func lockOwner(f *os.File) int {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	// "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF"; waiting locks
	// have "->" after the number.
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(sys.Dev)), unix.Minor(uint64(sys.Dev)), sys.Ino)
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		fs := strings.Fields(line)
		if len(fs) >= 6 && fs[1] == "FLOCK" && fs[5] == id {
			pid, _ := strconv.Atoi(fs[4])
			return max(pid, 0)
		}
	}
	return 0
}

// processAlive reports whether process pid exists and is not a zombie.
func processAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) != syscall.ESRCH
	}
	// pid (comm) state ...
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

func now() int64 { return time.Now().UnixMicro() }

func (l *logWriter) write(b []byte) {
	if l.err == nil {
		_, l.err = l.w.Write(b)
	}
}

// node logs a rule's state change with the counts after it.
func (l *logWriter) node(id int, st RuleState, jobID int64, c Counts) {
	b := l.buf[:0]
	b = strconv.AppendInt(b, now(), 10)
	for _, v := range []int64{int64(id), int64(st), jobID, int64(c.Waiting), int64(c.Running),
		int64(c.Complete), int64(c.Failed), int64(c.Aborted), int64(c.Total)} {
		b = append(b, ' ')
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, '\n')
	l.buf = b
	l.write(b)
}

// file logs a file's state: expected with its estimated size, or made with
// its real one.
func (l *logWriter) file(name string, state int, size int64) {
	b := append(l.buf[:0], "# FILE "...)
	b = strconv.AppendInt(b, now(), 10)
	b = append(b, ' ')
	b = append(b, name...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(state), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, size, 10)
	b = append(b, '\n')
	l.buf = b
	l.write(b)
}

// gc logs a garbage collection: "# GC <µs> <collected> <µs it took>
// <collected so far>", as CCTools does.
func (l *logWriter) gc(collected int, took time.Duration, total int) {
	l.write(fmt.Appendf(nil, "# GC %d %d %d %d\n", now(), collected, took.Microseconds(), total))
}

// structure logs the workflow's rules, as CCTools' --log-verbose does on
// a first run: for each, "# NODE", "# CATEGORY", "# SYMBOL" (the category
// again, its old name), "# PARENTS" (the rule making each source that a
// rule makes), "# SOURCES", "# TARGETS" and "# COMMAND", tab-separated.
func (l *logWriter) structure(w *Workflow) {
	maker := map[string]int{}
	for _, r := range w.Rules {
		for _, f := range r.Targets {
			maker[f.Name] = r.ID
		}
	}
	var b []byte
	for _, r := range w.Rules {
		b = fmt.Appendf(b[:0], "# NODE\t%d\t%s\n# CATEGORY\t%d\t%s\n# SYMBOL\t%d\t%s\n# PARENTS\t%d",
			r.ID, r.Command, r.ID, r.Category, r.ID, r.Category, r.ID)
		for _, f := range r.Sources {
			if p, ok := maker[f.Name]; ok {
				b = fmt.Appendf(b, "\t%d", p)
			}
		}
		b = fmt.Appendf(b, "\n# SOURCES\t%d", r.ID)
		for _, f := range r.Sources {
			b = append(append(b, '\t'), f.Name...)
		}
		b = fmt.Appendf(b, "\n# TARGETS\t%d", r.ID)
		for _, f := range r.Targets {
			b = append(append(b, '\t'), f.Name...)
		}
		b = fmt.Appendf(b, "\n# COMMAND\t%d\t%s\n", r.ID, r.Command)
		l.write(b)
	}
}

// event logs "# STARTED", "# COMPLETED", "# FAILED" or "# ABORTED".
func (l *logWriter) event(what string) {
	l.write(fmt.Appendf(nil, "# %s %d\n", what, now()))
}

// flush hands the buffered lines to the kernel.
func (l *logWriter) flush() error {
	if l.err == nil && l.w.Buffered() > 0 {
		l.err = l.w.Flush()
	}
	return l.err
}

// sync flushes and fsyncs.
func (l *logWriter) sync() error {
	if l.flush() == nil {
		l.err = l.f.Sync()
		l.lastSync = time.Now()
	}
	return l.err
}

func (l *logWriter) maybeSync() error {
	if time.Since(l.lastSync) >= syncEvery {
		return l.sync()
	}
	return l.err
}

// unhold lets the keeper of the executor's jobs go of the lock.
func (l *logWriter) unhold() error {
	if l.release == nil {
		return nil
	}
	err := l.release()
	l.release = nil
	return err
}

func (l *logWriter) close() error {
	err := l.sync()
	if herr := l.unhold(); err == nil {
		err = herr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	return nil
}

// A logRecord is what a log says about a workflow.
type logRecord struct {
	state   []RuleState // last state of every rule; Waiting if never logged
	logged  []bool      // the rule appears in the log
	started []int64     // when each rule last started (µs), 0 if never
	took    []int64     // how long each rule's last completed run took (µs), 0 if none
	ended   []int64     // when that run completed (µs)
	made    map[string]int64
	// expected holds the files some rule was about to make: a rule that is
	// not complete and expected one of its outputs may have left part of it.
	expected map[string]bool
	// collected holds the files garbage collection deleted (and no rule
	// made again since).
	collected map[string]bool
	runs      int // how many runs the log records (# STARTED lines)
}

// readLog reads the log at path for a workflow of n rules. A missing log
// is an empty record. Lines about rules beyond n are ignored (the workflow
// may have lost rules since). A final line without its newline, which a
// killed run can leave, is ignored; any other unreadable line is an error
// naming it.
func readLog(path string, n int) (*logRecord, error) {
	rec := &logRecord{
		state:     make([]RuleState, n),
		logged:    make([]bool, n),
		started:   make([]int64, n),
		took:      make([]int64, n),
		ended:     make([]int64, n),
		made:      map[string]int64{},
		expected:  map[string]bool{},
		collected: map[string]bool{},
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn last line
		}
		line := string(data[:i])
		data = data[i+1:]
		if err := rec.add(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w (the log may be damaged; remove it to start the workflow afresh)", path, lineNo, err)
		}
	}
	return rec, nil
}

func (rec *logRecord) add(line string) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	if strings.HasPrefix(line, "#") {
		fields := strings.Fields(line[1:])
		if len(fields) == 0 {
			return nil
		}
		switch fields[0] {
		case "STARTED":
			rec.runs++
		case "FILE":
			// # FILE <ts> <name> <state> <size>; names may hold spaces.
			rest := strings.TrimSpace(line[1:])
			rest = strings.TrimSpace(strings.TrimPrefix(rest, "FILE"))
			ts, rest, ok1 := strings.Cut(rest, " ")
			j := strings.LastIndexByte(rest, ' ')
			if !ok1 || j < 0 {
				return errors.New("malformed FILE line")
			}
			k := strings.LastIndexByte(rest[:j], ' ')
			if k < 0 {
				return errors.New("malformed FILE line")
			}
			name, state := rest[:k], rest[k+1:j]
			t, err1 := strconv.ParseInt(ts, 10, 64)
			st, err2 := strconv.Atoi(state)
			if err1 != nil || err2 != nil {
				return errors.New("malformed FILE line")
			}
			switch st {
			case fileExists:
				rec.made[name] = t
				delete(rec.collected, name)
			case fileExpect:
				rec.expected[name] = true
			case fileDeleted:
				rec.collected[name] = true
			}
		}
		// Other comment lines (CACHE, GC, MOUNT, verbose DAG dumps) carry
		// nothing recovery needs.
		return nil
	}
	f := strings.Fields(line)
	if len(f) < 3 {
		return fmt.Errorf("malformed line %q", line)
	}
	var v [4]int64
	for i := range v {
		if i >= len(f) {
			break
		}
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return fmt.Errorf("malformed line %q", line)
		}
		v[i] = n
	}
	id, st := v[1], RuleState(v[2])
	if st < Waiting || st > Aborted || id < 0 {
		return fmt.Errorf("malformed line %q", line)
	}
	if id >= int64(len(rec.state)) {
		return nil
	}
	rec.state[id] = st
	rec.logged[id] = true
	switch {
	case st == Running:
		rec.started[id] = v[0]
	case st == Complete && rec.started[id] > 0 && v[0] >= rec.started[id]:
		rec.took[id], rec.ended[id] = v[0]-rec.started[id], v[0]
	}
	return nil
}
