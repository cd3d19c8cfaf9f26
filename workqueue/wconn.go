package workqueue

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/workqueue/sched"
	"github.com/rightsize/rightsize/workqueue/wire"
)

type workerID = sched.WorkerID

// workerConn is one connected worker. Its reader goroutine owns reading,
// its writer goroutine owns writing; they share the queue of operations,
// the attempts the worker runs, what its cache holds and the replies
// expected, under mu.
type workerConn struct {
	m      *Master
	log    *slog.Logger
	id     workerID
	conn   net.Conn
	c      *wire.Conn
	addr   string
	host   string
	hello  wire.Hello
	joined time.Time

	mu      sync.Mutex
	ops     []op
	running map[int]*attempt // by wire task ID
	cached  map[string]stamp // cache name → what was sent
	pending []expect         // replies the worker owes, in order
	closed  bool
	signal  chan struct{}

	recv *receiving // the output being received; owned by the reader

	lastHeard     atomic.Int64
	pool          atomic.Pointer[string] // the pool that started it ("info from-factory")
	key           atomic.Pointer[string] // its worker-id ("info worker-id"), the same on every connection
	bytesSent     atomic.Int64
	bytesReceived atomic.Int64
	completed     atomic.Int64

	fastAborts int // owned by the loop
}

// stamp identifies the version of a file in a worker's cache.
type stamp struct {
	size  int64
	mtime int64
}

func stampOf(info os.FileInfo) stamp { return stamp{info.Size(), info.ModTime().UnixNano()} }

// op is work for the writer.
type op struct {
	kind    opKind
	attempt *attempt
	fetch   *fetchJob
	name    string
}

type opKind int

const (
	opDispatch opKind = iota
	opFetch
	opKill
	opUnlink
	opSendResults
	opCheck
	opRelease
)

// expect is a reply the worker owes: to send_results, or to get (for
// output out of fetch).
type expect struct {
	fetch *fetchJob
	out   int
}

// fetchJob collects one attempt's outputs.
type fetchJob struct {
	a         *attempt
	r         *Result
	start     time.Time
	mark      time.Duration // on the master's shareClock, while counted (w.mu)
	counted   bool
	remaining int
	missing   []string // outputs not (wholly) sent, and why
	stored    []bool   // by output: in place
	err       error
}

func newWorkerConn(m *Master, id workerID, conn net.Conn, c *wire.Conn, hello wire.Hello) *workerConn {
	w := &workerConn{
		m: m, id: id, conn: conn, c: c, hello: hello, joined: time.Now(),
		addr:    conn.RemoteAddr().String(),
		host:    hostOf(conn.RemoteAddr()),
		running: map[int]*attempt{},
		cached:  map[string]stamp{},
		signal:  make(chan struct{}, 1),
	}
	w.log = m.log.With("worker", w.addr)
	w.lastHeard.Store(time.Now().UnixNano())
	return w
}

// run serves the connection until it ends.
func (w *workerConn) run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.writeLoop()
	}()
	// When the master closes, release the worker so that it may serve the
	// next master at once, and do not wait long for it.
	go func() {
		select {
		case <-w.m.done:
			w.release()
			select {
			case <-done:
			case <-time.After(time.Second):
				w.close()
			}
		case <-done:
		}
	}()
	err := w.readLoop()
	w.close()
	<-done
	// Fetches cut short no longer share the master's network.
	w.mu.Lock()
	pending := w.pending
	w.mu.Unlock()
	for _, p := range pending {
		if p.fetch != nil {
			w.uncount(p.fetch)
		}
	}
	w.m.send(evWorkerLeft{w: w, err: err})
}

func (w *workerConn) enqueue(o op) {
	w.hold(o)
	w.kick()
}

// hold queues o for the writer without waking it, to leave in the same
// write as what is queued next: one wakeup of the worker instead of two.
// The loop kicks every worker at its tick (loop.sendHeld), so that nothing
// is held longer than that.
func (w *workerConn) hold(o op) {
	w.mu.Lock()
	if !w.closed {
		w.ops = append(w.ops, o)
	}
	w.mu.Unlock()
}

// kick wakes the writer to send what is queued.
func (w *workerConn) kick() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// close ends the connection; both goroutines then stop.
func (w *workerConn) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.conn.Close()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *workerConn) dispatch(a *attempt) {
	w.mu.Lock()
	w.running[a.wire] = a
	w.mu.Unlock()
	w.enqueue(op{kind: opDispatch, attempt: a})
}

// abort stops an attempt unless the worker has already reported it.
func (w *workerConn) abort(a *attempt) {
	w.mu.Lock()
	_, ok := w.running[a.wire]
	delete(w.running, a.wire)
	w.mu.Unlock()
	if ok {
		w.enqueue(op{kind: opKill, attempt: a})
	}
}

// fetch fetches the outputs of an attempt that reported, once the loop has
// taken its result. It is held: the caller kicks the writer once it has
// queued the worker's next task, to go in the same write.
func (w *workerConn) fetch(j *fetchJob) { w.hold(op{kind: opFetch, fetch: j}) }

// hasHeld reports whether ops wait for the writer.
func (w *workerConn) hasHeld() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ops) > 0
}

// discard cleans up after an attempt that reported but lost to another
// attempt of its task: its sandbox, its outputs and its inputs that are not
// cached.
func (w *workerConn) discard(a *attempt) {
	w.enqueue(op{kind: opKill, attempt: a})
	for _, in := range a.e.inputs {
		if !in.Cache {
			w.enqueue(op{kind: opUnlink, name: in.name})
		}
	}
	for _, out := range a.e.outputs {
		w.enqueue(op{kind: opUnlink, name: out.name})
	}
}

func (w *workerConn) check()   { w.enqueue(op{kind: opCheck}) }
func (w *workerConn) release() { w.enqueue(op{kind: opRelease}) }

func (w *workerConn) writeLoop() {
	for {
		<-w.signal
		w.mu.Lock()
		ops, closed := w.ops, w.closed
		w.ops = nil
		w.mu.Unlock()
		if closed {
			return
		}
		for _, o := range ops {
			if err := w.write(o); err != nil {
				if !errors.Is(err, errReleased) {
					w.log.Warn("writing to worker", "err", err)
				}
				w.close()
				return
			}
		}
		if err := w.c.Flush(); err != nil {
			w.close()
			return
		}
	}
}

var errReleased = errors.New("released")

func (w *workerConn) write(o op) error {
	switch o.kind {
	case opDispatch:
		return w.sendTask(o.attempt)
	case opFetch:
		j := o.fetch
		if j.remaining == 0 {
			w.finishFetch(j)
			return nil
		}
		w.mu.Lock()
		j.mark, j.counted = w.m.transfers.begin(time.Now()), true
		w.mu.Unlock()
		for i, out := range j.a.e.outputs {
			w.mu.Lock()
			w.pending = append(w.pending, expect{fetch: j, out: i})
			w.mu.Unlock()
			if err := w.c.Send(wire.Get{Name: out.name, Recursive: true}); err != nil {
				return err
			}
		}
		return nil
	case opKill:
		return w.c.Send(wire.Kill{ID: o.attempt.wire})
	case opUnlink:
		return w.c.Send(wire.Unlink{Name: o.name})
	case opSendResults:
		w.mu.Lock()
		w.pending = append(w.pending, expect{})
		w.mu.Unlock()
		return w.c.Send(wire.SendResults{N: -1})
	case opCheck:
		return w.c.Send(wire.Check{})
	case opRelease:
		w.c.Send(wire.Release{})
		w.c.Flush()
		return errReleased
	}
	return nil
}

// sendTask sends an attempt's inputs that the worker lacks, then the task.
func (w *workerConn) sendTask(a *attempt) error {
	start := time.Now()
	mark := w.m.transfers.begin(start)
	defer func() { a.sendShare.Store(int64(w.m.transfers.end(mark, time.Now()))) }()
	e := a.e
	sentBefore := w.bytesSent.Load()
	for _, in := range e.inputs {
		if err := w.sendInput(in); err != nil {
			var missing *inputError
			if errors.As(err, &missing) {
				w.mu.Lock()
				delete(w.running, a.wire)
				w.mu.Unlock()
				w.m.send(evInputMissing{a: a, err: fmt.Errorf("task %d: %w", e.id, missing.err)})
				return nil
			}
			return err
		}
	}
	spec := &wire.TaskSpec{
		ID: a.wire, Command: e.task.Command, Category: category(e.task),
		Cores: a.alloc.Cores, GPUs: a.alloc.GPUs, MemoryMB: a.alloc.MemoryMB, DiskMB: a.alloc.DiskMB,
		WallTime: int64(e.task.WallTime.Seconds()),
		Env:      e.task.Env,
	}
	if e.task.WallTime > 0 && spec.WallTime == 0 {
		spec.WallTime = 1
	}
	for _, in := range e.inputs {
		spec.Inputs = append(spec.Inputs, wire.TaskFile{CacheName: in.name, Remote: in.remote, Flags: in.flags()})
	}
	for _, out := range e.outputs {
		spec.Outputs = append(spec.Outputs, wire.TaskFile{CacheName: out.name, Remote: out.remote, Flags: out.flags()})
	}
	err := w.c.SendTask(spec)
	if err == nil && w.bytesSent.Load() != sentBefore {
		// Out of the buffer before the transfer's end is taken: the
		// last 64 KiB of inputs would otherwise cross the network
		// uncounted, and a slow link look free to the capacity estimate.
		// A task that sent no input waits for the writer's flush, with
		// whatever else it sends now.
		err = w.c.Flush()
	}
	a.sendTime.Store(int64(time.Since(start)))
	return err
}

// inputError is a local input that could not be read: the task fails, the
// connection goes on.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }

func (w *workerConn) sendInput(in fileRef) error {
	if in.Local == "" {
		w.mu.Lock()
		_, have := w.cached[in.name]
		w.mu.Unlock()
		if in.Cache && have {
			return nil
		}
		if err := w.c.SendBody(wire.Put{Name: in.name, Size: int64(len(in.Data)), Mode: 0o644}, in.Data); err != nil {
			return err
		}
		w.bytesSent.Add(int64(len(in.Data)))
		if in.Cache {
			w.setCached(in.name, stamp{size: int64(len(in.Data))})
		}
		return nil
	}
	info, err := os.Stat(in.Local)
	if err != nil {
		return &inputError{err}
	}
	st := stampOf(info)
	w.mu.Lock()
	have, ok := w.cached[in.name]
	w.mu.Unlock()
	if in.Cache && ok && have == st {
		return nil
	}
	if info.IsDir() {
		if err := w.c.Send(wire.Dir{Name: in.name}); err != nil {
			return err
		}
		if err := w.sendDirEntries(in.Local, 0); err != nil {
			return err
		}
	} else if err := w.sendFile(in.Local, in.name, info); err != nil {
		return err
	}
	if in.Cache {
		w.setCached(in.name, st)
	}
	return nil
}

func (w *workerConn) setCached(name string, st stamp) {
	w.mu.Lock()
	w.cached[name] = st
	w.mu.Unlock()
}

// sendFile puts a local file. A file that cannot be opened is an input
// error; one that shrinks while being sent breaks the stream, so the
// connection goes.
func (w *workerConn) sendFile(path, name string, info os.FileInfo) error {
	f, err := os.Open(path)
	if err != nil {
		return &inputError{err}
	}
	defer f.Close()
	if err := w.c.SendFrom(wire.Put{Name: name, Size: info.Size(), Mode: info.Mode().Perm()}, f, info.Size()); err != nil {
		return err
	}
	w.bytesSent.Add(info.Size())
	return nil
}

// sendDirEntries sends a directory's content, CCTools style: entries named
// relative to the directory, nested "dir NAME" ... "end".
func (w *workerConn) sendDirEntries(dir string, depth int) error {
	if depth > 64 {
		return &inputError{fmt.Errorf("%s: directories nested too deep", dir)}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, ent := range entries {
		path := filepath.Join(dir, ent.Name())
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if info.IsDir() {
			if err := w.c.Send(wire.Dir{Name: ent.Name()}); err != nil {
				return err
			}
			if err := w.sendDirEntries(path, depth+1); err != nil {
				return err
			}
			continue
		}
		if err := w.sendFile(path, ent.Name(), info); err != nil {
			return err
		}
	}
	return w.c.Send(wire.End{})
}

// maxPoolName bounds the pool name kept of a worker's report.
const maxPoolName = 256

// maxFeatures bounds the features kept of a worker's report.
const maxFeatures = 64

// readLoop reads the worker's messages until the connection fails or the
// worker breaks the protocol.
func (w *workerConn) readLoop() error {
	// A reply cut short leaves nothing behind: the retry starts clean.
	defer func() {
		if w.recv != nil {
			w.recv.discard()
		}
	}()
	var res sched.Resources
	var features []string
	for {
		msg, err := w.c.ReadMessage()
		if err != nil {
			return err
		}
		w.lastHeard.Store(time.Now().UnixNano())
		switch m := msg.(type) {
		case wire.Info:
			// Only a plain name: one with "," or ":" would forge other
			// pools' counts in workers_by_pool.
			if m.Key == "from-factory" && m.Value != "" && len(m.Value) <= maxPoolName && plainName(m.Value) == m.Value {
				w.pool.Store(&m.Value)
			}
			if m.Key == "worker-id" && m.Value != "" && len(m.Value) <= maxPoolName {
				w.key.Store(&m.Value)
			}
		case wire.Alive:
		case wire.Feature:
			if len(features) < maxFeatures {
				features = append(features, m.Name)
			}
		case wire.Resource:
			switch m.Name {
			case "cores":
				res.Cores = m.Total
			case "memory":
				res.MemoryMB = int64(m.Total)
			case "disk":
				res.DiskMB = int64(m.Total)
			case "gpus":
				res.GPUs = int64(m.Total)
			case "tag":
				// The end of a resource report.
				w.m.send(evWorkerJoined{w: w, res: res, features: features})
			}
		case wire.AvailableResults:
			w.enqueue(op{kind: opSendResults})
		case wire.Result:
			if err := w.result(m); err != nil {
				return err
			}
		case wire.File, wire.Missing, wire.Dir:
			if err := w.output(m); err != nil {
				return err
			}
		case wire.End:
			if err := w.endReply(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("protocol error: unexpected %q", strings.TrimSpace(string(msg.AppendTo(nil))))
		}
	}
}

func (w *workerConn) result(m wire.Result) error {
	out, err := w.c.ReadBody(m.Size)
	if err != nil {
		return err
	}
	w.bytesReceived.Add(m.Size)
	w.mu.Lock()
	a := w.running[m.TaskID]
	delete(w.running, m.TaskID)
	w.mu.Unlock()
	if a == nil {
		w.log.Debug("result for a task no longer here", "wire_task", m.TaskID)
		return nil
	}
	if ResultCode(m.Status) == Forsaken {
		// Given back: the worker could not run it as it should (ours: a
		// task wrote to a cached input the task held). Run it again.
		w.log.Info("task given back by its worker", "task", a.e.id)
		w.enqueue(op{kind: opKill, attempt: a})
		w.unlinkUncached(a.e.inputs)
		w.m.send(evForsaken{a: a})
		return nil
	}
	w.completed.Add(1)
	r := &Result{
		Status: ResultCode(m.Status), ExitCode: m.Exit, Output: out, Worker: w.addr,
		Dispatched: a.dispatched, Exec: time.Duration(m.ExecUsec) * time.Microsecond,
		Transfer: time.Duration(a.sendTime.Load()),
	}
	// The loop decides whether this attempt's outputs are fetched: a task
	// with a speculative copy has two attempts, and only the first to
	// report may write the task's output files.
	j := &fetchJob{a: a, r: r, start: time.Now(), remaining: len(a.e.outputs), stored: make([]bool, len(a.e.outputs))}
	w.m.send(evReported{a: a, ok: m.Status == 0 && m.Exit == 0, fetch: j})
	return nil
}

// maxReplyEntries bounds the entries of one output as a worker sends it,
// as wire.MaxDirDepth bounds their depth. A worker that follows symbolic
// links (CCTools' does) turns a link loop into a tree 40 levels deep (where
// the kernel stops resolving links), 2^40 entries wide with two links; a
// hostile one sends anything.
const maxReplyEntries = 1 << 17

// receiving is the get reply being read: one output, written to a staging
// path beside its destination (Local + ".wqpart"), and moved into place
// only once the reply is complete and whole. A worker dying in the middle,
// or an entry missing, leaves the destination as it was, and a retry
// starts clean. The entries of a directory are made through an os.Root on
// the staging directory, which holds nothing but what this reply made: no
// name a worker sends is written outside the destination, or through a
// symbolic link already there.
type receiving struct {
	j       *fetchJob
	i       int // the output's index
	out     fileRef
	stage   string
	kind    byte     // 0 until the output's own line came: 'f'ile, 'd'irectory, 'm'issing
	root    *os.Root // the staged directory
	entries int
	failed  bool // not to be put in place
}

// fail records a local failure to store the output.
func (r *receiving) fail(err error) {
	r.failed = true
	if r.j.err == nil {
		r.j.err = fmt.Errorf("output %s: %w", r.out.remote, err)
	}
}

// missing records that the output, or an entry of it, was not sent.
func (r *receiving) missing(entry string, errno int) {
	r.failed = true
	why := missingReason(errno)
	if entry != "" {
		if why == "" {
			why = "not found"
		}
		why = path.Join(r.out.remote, entry) + ": " + why
	}
	if why == "" {
		r.j.missing = append(r.j.missing, r.out.remote)
	} else {
		r.j.missing = append(r.j.missing, r.out.remote+" ("+why+")")
	}
}

// missingReason explains a missing item; "" for one that does not exist.
// Our workers refuse symbolic links with ELOOP, other special files with
// EINVAL, entries nested too deep with ENAMETOOLONG.
func missingReason(errno int) string {
	switch en := syscall.Errno(errno); en {
	case syscall.ENOENT:
		return ""
	case syscall.ELOOP:
		return "a symbolic link, not sent: make the command copy the file instead of linking it"
	case syscall.EINVAL:
		return "not a regular file or directory"
	case syscall.ENAMETOOLONG:
		return fmt.Sprintf("more than %d directories deep", wire.MaxDirDepth)
	default:
		return en.Error()
	}
}

// discard removes what the reply staged.
func (r *receiving) discard() {
	if r.root != nil {
		r.root.Close()
	}
	os.RemoveAll(r.stage)
}

// finish puts the output in place, if it came whole.
func (r *receiving) finish() {
	if r.root != nil {
		r.root.Close()
		r.root = nil
	}
	switch {
	case r.kind == 0:
		r.missing("", int(syscall.ENOENT)) // an empty reply
	case r.kind != 'm' && !r.failed:
		if err := install(r.stage, r.out.Local); err != nil {
			r.fail(err)
		} else {
			r.j.stored[r.i] = true
		}
	}
	if !r.j.stored[r.i] {
		os.RemoveAll(r.stage)
	}
}

// install moves stage to dest, replacing whatever is there, a symbolic
// link included (it is not followed). A directory in the way is set aside
// and removed only once stage is in place.
func install(stage, dest string) error {
	if err := os.Rename(stage, dest); err == nil {
		return nil
	} else if _, lerr := os.Lstat(dest); lerr != nil {
		return err
	}
	old := dest + ".wqold"
	os.RemoveAll(old)
	if err := os.Rename(dest, old); err != nil {
		return err
	}
	if err := os.Rename(stage, dest); err != nil {
		os.Rename(old, dest)
		return err
	}
	return os.RemoveAll(old)
}

// output stores one item of a get reply.
func (w *workerConn) output(msg wire.Message) error {
	w.mu.Lock()
	var head expect
	if len(w.pending) > 0 {
		head = w.pending[0]
	}
	w.mu.Unlock()
	if head.fetch == nil {
		return fmt.Errorf("protocol error: %q outside a get reply", strings.TrimSpace(string(msg.AppendTo(nil))))
	}
	r := w.recv
	if r == nil {
		out := head.fetch.a.e.outputs[head.out]
		r = &receiving{j: head.fetch, i: head.out, out: out, stage: out.Local + ".wqpart"}
		w.recv = r
	}
	var name string
	switch m := msg.(type) {
	case wire.File:
		name = m.Name
	case wire.Dir:
		if !m.Reply {
			return fmt.Errorf("protocol error: %q in a get reply", strings.TrimSpace(string(m.AppendTo(nil))))
		}
		name = m.Name
	case wire.Missing:
		name = m.Name
	}
	if name == r.out.name {
		return w.outputItself(r, msg)
	}
	rest, ok := strings.CutPrefix(name, r.out.name+"/")
	if !ok {
		// A name we did not ask for: the worker is broken or hostile.
		return fmt.Errorf("protocol error: worker sent %q when asked for %q", name, r.out.name)
	}
	if err := wire.CheckRelativePath(rest); err != nil {
		return fmt.Errorf("protocol error: %w", err)
	}
	if r.kind != 'd' {
		return fmt.Errorf("protocol error: worker sent %q, in no directory", name)
	}
	rest = path.Clean(rest)
	r.entries++
	var err error
	if _, missing := msg.(wire.Missing); !missing && strings.Count(rest, "/") >= wire.MaxDirDepth {
		err = fmt.Errorf("more than %d directories deep (a symbolic link loop, on a worker that follows links?)", wire.MaxDirDepth)
	} else if r.entries > maxReplyEntries {
		err = fmt.Errorf("more than %d entries", maxReplyEntries)
	}
	if err != nil {
		// The rest of the reply cannot be skipped: the task fails, and
		// the connection goes.
		r.fail(err)
		r.discard()
		w.recv = nil
		w.mu.Lock()
		w.pending = w.pending[1:]
		w.mu.Unlock()
		w.finishFetch(r.j)
		return fmt.Errorf("protocol error: %w", err)
	}
	switch m := msg.(type) {
	case wire.Missing:
		r.missing(rest, m.Errno)
	case wire.Dir:
		if r.root != nil {
			if err := r.root.MkdirAll(rest, 0o777); err != nil {
				r.fail(err)
			}
		}
	case wire.File:
		if r.root == nil { // the directory could not be made
			return w.c.DiscardBody(m.Size)
		}
		if dir := path.Dir(rest); dir != "." {
			err = r.root.MkdirAll(dir, 0o777)
		}
		var f *os.File
		if err == nil {
			f, err = r.root.OpenFile(rest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		}
		return w.receiveBody(r, f, err, m.Size)
	}
	return nil
}

// outputItself handles the line about the output itself: it comes first,
// and once.
func (w *workerConn) outputItself(r *receiving, msg wire.Message) error {
	if r.kind != 0 {
		return fmt.Errorf("protocol error: worker sent %q twice", r.out.name)
	}
	r.kind = 'm'
	switch m := msg.(type) {
	case wire.Missing:
		r.missing("", m.Errno)
	case wire.Dir:
		r.kind = 'd'
		if err := stage(r.stage, func() error { return os.Mkdir(r.stage, 0o777) }); err != nil {
			r.fail(err)
			return nil
		}
		root, err := os.OpenRoot(r.stage)
		if err != nil {
			r.fail(err)
			return nil
		}
		r.root = root
	case wire.File:
		r.kind = 'f'
		var f *os.File
		err := stage(r.stage, func() (err error) {
			f, err = os.OpenFile(r.stage, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
			return err
		})
		return w.receiveBody(r, f, err, m.Size)
	}
	return nil
}

// stage makes the staging path path with create (O_EXCL, or mkdir), which
// fails if anything is there: what an earlier attempt left, or a killed
// master, is removed, a missing parent directory made, and create tried
// again. The usual case, a new file in an existing directory, costs
// create's one system call.
func stage(path string, create func() error) error {
	err := create()
	for range 2 {
		switch {
		case errors.Is(err, fs.ErrExist):
			err = os.RemoveAll(path)
		case errors.Is(err, fs.ErrNotExist):
			err = os.MkdirAll(filepath.Dir(path), 0o777)
		default:
			return err
		}
		if err != nil {
			return err
		}
		err = create()
	}
	return err
}

// receiveBody copies a file's body to f. A local failure (openErr, a full
// disk) fails the output and keeps the stream in step; a broken stream
// ends the connection.
func (w *workerConn) receiveBody(r *receiving, f *os.File, openErr error, size int64) error {
	if openErr != nil {
		r.fail(openErr)
		return w.c.DiscardBody(size)
	}
	err := w.c.CopyBody(wire.GuardWriter(f), size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, wire.ErrTooLong) || isNetErr(err) {
			return err
		}
		r.fail(err)
		return nil
	}
	w.bytesReceived.Add(size)
	return nil
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

// endReply closes the reply at the head of the queue.
func (w *workerConn) endReply() error {
	w.mu.Lock()
	if len(w.pending) == 0 {
		w.mu.Unlock()
		return errors.New("protocol error: end without a request")
	}
	head := w.pending[0]
	w.pending = w.pending[1:]
	w.mu.Unlock()
	if j := head.fetch; j != nil {
		r := w.recv
		w.recv = nil
		if r == nil {
			r = &receiving{j: j, i: head.out, out: j.a.e.outputs[head.out]}
		}
		r.finish()
		j.remaining--
		if j.remaining == 0 {
			w.finishFetch(j)
		}
	}
	return nil
}

// unlinkUncached removes from the worker the inputs not to be cached.
func (w *workerConn) unlinkUncached(inputs []fileRef) {
	for _, in := range inputs {
		if !in.Cache {
			w.enqueue(op{kind: opUnlink, name: in.name})
		}
	}
}

// uncount ends j's transfer on the master's shareClock, once, and returns
// its share.
func (w *workerConn) uncount(j *fetchJob) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !j.counted {
		return 0
	}
	j.counted = false
	return w.m.transfers.end(j.mark, time.Now())
}

// finishFetch completes an attempt: status from what arrived, cleanup on
// the worker, and the result to the loop.
func (w *workerConn) finishFetch(j *fetchJob) {
	r, e := j.r, j.a.e
	r.Transfer += time.Since(j.start)
	r.netShare = time.Duration(j.a.sendShare.Load()) + w.uncount(j)
	switch {
	case j.err != nil:
		r.Status = OutputTransfer
		r.Err = fmt.Errorf("task %d: storing outputs: %w", e.id, j.err)
	case len(j.missing) > 0 && r.Status == Success:
		r.Status = OutputMissing
		r.Err = fmt.Errorf("task %d: outputs not produced: %s", e.id, strings.Join(j.missing, ", "))
	}
	// The cleanup is held, not sent: it leaves with the next message to
	// this worker (the next get and task, a send_results), or at the
	// loop's next tick (loop.sendHeld), so that it costs the worker no
	// wakeup of its own.
	w.hold(op{kind: opKill, attempt: j.a})
	for _, in := range e.inputs {
		if !in.Cache {
			w.hold(op{kind: opUnlink, name: in.name})
		}
	}
	for i, out := range e.outputs {
		if !out.Cache {
			w.hold(op{kind: opUnlink, name: out.name})
			continue
		}
		// The worker keeps a cached output: a later task reading the
		// local copy as an input need not send it back.
		if info, err := os.Stat(out.Local); err == nil && j.stored[i] && j.err == nil {
			w.setCached(out.name, stampOf(info))
		}
	}
	if !w.m.send(evFetched{a: j.a, r: r}) {
		w.kick() // the master is closing: no tick will send the cleanup
	}
}
