// Package workqueue is a Work Queue master as a Go library: submit tasks
// (a command, input files and buffers, output files, environment,
// resources, category), and collect results as workers finish them. Workers
// connect over TCP (or TLS) and speak CCTools' protocol 9, so both
// rightsize workers and Debian's work_queue_worker serve it; with a
// password, a worker must prove it knows it before the master does. With a
// project name it advertises itself to catalogs, including its capacity (in
// tasks) and its workers and their cores by pool, so that workers started
// with -M, factories and pools find it; a pool's workers beyond what the
// pool's decision in the catalog gives it — counted in the pool's unit, a
// worker of k times its cores as k — get no new task and are released
// once they hold none (package enforce). Connections that have not finished their handshake are bounded
// in number and time, so that a flood of them cannot starve the
// application of file descriptors.
//
// Matching, how many tasks a worker is trusted with, speculative copies,
// fast abort, which report of a task is taken, keepalive and worker
// dropping are decided by package sched; this package is the driver
// around it: sockets, files and clocks. It does not start workers (see
// the worker and factory packages; package foreman puts a master of this
// package behind a worker) and does not retry failed commands: a result
// with a non-zero exit is the application's to judge.
package workqueue

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/lifecycle"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/sched"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Config configures a master. The zero value of each field means its
// documented default.
type Config struct {
	// Addr is where to listen for workers (default ":9123", CCTools'
	// port). Use "127.0.0.1:0" or ":0" for any free port; Port reports it.
	Addr string
	// Project, if set, is advertised to Catalogs so that workers and factories
	// can find the master by name. While workers of a pool are connected,
	// the master also reads from Catalogs what each pool gives it (package
	// enforce), every AdvertiseInterval or 5 s, whichever is shorter: a
	// new decision takes effect within that. The excess gets no new task and
	// each is released the moment it holds none, never while it holds a
	// task; one back within AdvertiseInterval of its release is kept so,
	// drained, rather than released again.
	Project string
	// Priority is advertised with Project: a worker that serves several
	// projects prefers the master with the highest (CCTools'
	// work_queue_specify_priority; default 0).
	Priority int
	// Catalogs are the catalog servers ("host:port") to advertise to
	// (default catalog.DefaultAddrs()).
	Catalogs []string
	// CatalogNetwork is "udp" (default, as Debian's CCTools sends) or "tcp".
	CatalogNetwork string
	// AdvertiseInterval is the time between catalog updates (default 60 s).
	AdvertiseInterval time.Duration
	// FirstTasksDelay is how long after tasks arrive at an empty queue the
	// master sends an update, rather than leaving the catalog to show it
	// empty until the next AdvertiseInterval: long enough to count the
	// burst of submissions that usually follows the first (default 1 s;
	// negative: none).
	FirstTasksDelay time.Duration
	// Password, if set, is the password file's content (see
	// wire.ReadPasswordFile); workers must answer the CCTools challenge with
	// the same one. The master proves that it holds the password only to a
	// worker that has proved it first, and refuses a worker that sends back
	// one of the master's own challenges. A peer that proves the password
	// and hangs up is a worker pool checking that the master holds it
	// (package pool, every ten minutes): logged at Info the first time
	// from each host, at Debug after that.
	Password []byte
	// TLS, if set, makes workers connect over TLS (work_queue_worker --ssl,
	// workqueue worker --ssl), and the catalog record says "ssl": true. The
	// password exchange then runs inside TLS. See wire.ServerTLS.
	TLS *tls.Config
	// HandshakeTimeout is how long a new connection has to finish TLS, the
	// password exchange and its hello (default 10 s). At most a few hundred
	// connections are in their handshake at once (a quarter of them from one
	// host), and the master keeps a quarter of the file descriptors it may
	// open for the application's files, so that a flood of connections that
	// never authenticate delays new workers but fails no task.
	HandshakeTimeout time.Duration
	// FastAbort applies to every category; FastAbortCategories override it
	// per category. Off by default.
	FastAbort           FastAbort
	FastAbortCategories map[string]FastAbort
	// MaxLost is how often a task may lose its worker before it fails with
	// MaxRetries (lifecycle.Retries; default 5).
	MaxLost lifecycle.Retries
	// SlowStart is how many tasks a worker may hold before it has returned
	// a result (default 4; negative: as many as its resources allow); each
	// result lets it hold one more. Speculation copies a task that runs
	// far longer than its category's mean to a worker with idle room; the
	// first result wins (on by default; Stats.SpeculativeCopies counts
	// them). Together they keep a worker that lies about its resources, or
	// runs nothing, from holding the queue: see sched.Config.
	SlowStart   int
	Speculation Speculation
	// KeepaliveInterval is how long a silent worker goes before it is
	// asked whether it is alive (default 120 s); KeepaliveTimeout is how
	// long it then has to answer (default 30 s).
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// Limits bound what workers may send (see wire.Limits).
	Limits wire.Limits
	// Bandwidth, if positive, limits the master's traffic with its
	// workers, both ways and all connections together, to so many bytes a
	// second (a token bucket), as if its network link were that slow. It
	// is for measuring capacity on one machine (bench/capacity), where
	// loopback makes every transfer nearly free; 0 means no limit.
	Bandwidth int64
	// Logger receives the master's log (default: discarded).
	Logger *slog.Logger
	// Notices receives, as warnings, what an operator must hear about even
	// when Logger discards: connections refused for a wrong or missing
	// password, a reflected challenge or a failed TLS handshake (with the
	// peer's address), at most 10 a minute, each saying how many were held
	// back; and, at most once a minute, that the connection limits are
	// reached. Default: Logger.
	Notices *slog.Logger
	// Joined, if set, is called once for each worker when its first
	// resource report is complete, from the master's event loop: it must
	// not block or call the master.
	Joined func(WorkerInfo)
}

// WorkerInfo describes a worker that joined: where it connects from and
// what it says of itself.
type WorkerInfo struct {
	Addr     net.Addr
	Host     string // the name it gives
	Cores    float64
	Features []string
}

func (c *Config) validate() error {
	if c.Addr == "" {
		c.Addr = ":9123"
	}
	if c.Project != "" && len(c.Catalogs) == 0 {
		c.Catalogs = catalog.DefaultAddrs()
	}
	if c.CatalogNetwork == "" {
		c.CatalogNetwork = "udp"
	}
	if c.CatalogNetwork != "udp" && c.CatalogNetwork != "tcp" {
		return fmt.Errorf("workqueue: catalog network %q is neither udp nor tcp", c.CatalogNetwork)
	}
	if c.Bandwidth < 0 {
		return fmt.Errorf("workqueue: bandwidth %d bytes/s is negative", c.Bandwidth)
	}
	if c.AdvertiseInterval <= 0 {
		c.AdvertiseInterval = time.Minute
	}
	if c.FirstTasksDelay == 0 {
		c.FirstTasksDelay = time.Second
	}
	if c.KeepaliveInterval <= 0 {
		c.KeepaliveInterval = 120 * time.Second
	}
	if c.KeepaliveTimeout <= 0 {
		c.KeepaliveTimeout = 30 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Notices == nil {
		c.Notices = c.Logger
	}
	return nil
}

// ErrEmpty is returned by Wait when no task is submitted and unfinished.
var ErrEmpty = errors.New("workqueue: no tasks outstanding")

// ErrClosed is returned by Submit and Wait after Close.
var ErrClosed = errors.New("workqueue: master closed")

// Master is a running master. Its methods are safe for concurrent use.
type Master struct {
	cfg     Config
	log     *slog.Logger
	ln      net.Listener
	started time.Time

	admit      *admission
	challenges wire.Challenges // issued to workers, across connections
	refusals   throttle        // notices of refused connections
	fullness   throttle        // notices that the connection limits are reached
	// checkers are the hosts whose password check (passwordChecked) was
	// logged at Info.
	checkersMu sync.Mutex
	checkers   map[string]bool

	events chan event
	done   chan struct{} // closed by Close
	loopWG sync.WaitGroup
	connWG sync.WaitGroup

	nextID      atomic.Int64
	nextSerial  atomic.Int64
	transfers   shareClock // the master's network time, shared out
	link        *link      // Config.Bandwidth's limit, or nil
	outstanding atomic.Int64
	// queueFilled wakes the catalog reports when tasks arrive at an empty
	// queue, so that the catalog does not show it empty for a whole
	// AdvertiseInterval.
	queueFilled chan struct{}
	// pools reads the pools' decisions, checked under Password; only the
	// catalog reports use it.
	pools *enforce.Reader

	rmu     sync.Mutex
	results []*Result
	ready   chan struct{} // signalled when results grows

	closeOnce sync.Once
}

// Listen starts a master: it listens for workers and, with a project name,
// starts advertising to the catalogs. Call Close when done.
func Listen(cfg Config) (*Master, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("workqueue: %w", err)
	}
	m := &Master{
		cfg: cfg, log: cfg.Logger, ln: ln, started: time.Now(), pools: enforce.NewReader(cfg.Password),
		events: make(chan event, 1024),
		done:   make(chan struct{}),
		ready:  make(chan struct{}, 1),
		admit:  newAdmission(openFileLimit()),

		queueFilled: make(chan struct{}, 1),
		checkers:    map[string]bool{},
	}
	m.link = newLink(cfg.Bandwidth, m.done)
	m.refusals.burst, m.refusals.interval = 10, time.Minute
	m.fullness.burst, m.fullness.interval = 1, time.Minute
	l := newLoop(m)
	m.loopWG.Add(2)
	go func() { defer m.loopWG.Done(); l.run() }()
	go func() { defer m.loopWG.Done(); m.accept() }()
	if cfg.Project != "" {
		m.loopWG.Add(1)
		go func() { defer m.loopWG.Done(); m.advertise() }()
	}
	m.log.Info("listening for workers", "port", m.Port(), "project", cfg.Project)
	return m, nil
}

// Port is the TCP port the master listens on.
func (m *Master) Port() int { return m.ln.Addr().(*net.TCPAddr).Port }

// Addr is the address the master listens on.
func (m *Master) Addr() net.Addr { return m.ln.Addr() }

// Submit queues a task and returns its ID. The task's input files are read
// when it is dispatched, not now.
func (m *Master) Submit(t *Task) (int, error) {
	if err := t.validate(); err != nil {
		return 0, fmt.Errorf("workqueue: submit: %w", err)
	}
	id := int(m.nextID.Add(1))
	e := &entry{id: id, task: t, submitted: time.Now()}
	e.prepare(m)
	if m.outstanding.Add(1) == 1 {
		select {
		case m.queueFilled <- struct{}{}:
		default:
		}
	}
	if !m.send(evSubmit{e}) {
		m.outstanding.Add(-1)
		return 0, ErrClosed
	}
	return id, nil
}

// Wait returns the next finished task. It returns ErrEmpty at once when no
// task is outstanding, ctx's error when ctx ends first, and ErrClosed after
// Close.
func (m *Master) Wait(ctx context.Context) (*Result, error) {
	for {
		m.rmu.Lock()
		if len(m.results) > 0 {
			r := m.results[0]
			m.results[0] = nil
			m.results = m.results[1:]
			m.rmu.Unlock()
			return r, nil
		}
		empty := m.outstanding.Load() == 0 // read under rmu: deliver updates both together
		m.rmu.Unlock()
		if empty {
			return nil, ErrEmpty
		}
		select {
		case <-m.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.done:
			return nil, ErrClosed
		}
	}
}

// Empty reports whether no task is outstanding (submitted and neither
// returned by Wait nor cancelled).
func (m *Master) Empty() bool {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	return m.outstanding.Load() == 0 && len(m.results) == 0
}

// Cancel removes a task that has not finished: it is dropped from the queue
// or killed on its worker, and Wait will not return it. It reports whether
// the task was found unfinished.
func (m *Master) Cancel(id int) bool {
	return m.cancel(evCancel{id: id})
}

// CancelWaiting removes a task that waits in the queue, given to no
// worker: unlike Cancel, it leaves alone a task a worker is running (or
// whose outputs are being fetched). It reports whether it removed the
// task. A caller that can do the task elsewhere takes it back so without
// throwing away a worker's work.
func (m *Master) CancelWaiting(id int) bool {
	return m.cancel(evCancel{id: id, waiting: true})
}

func (m *Master) cancel(ev evCancel) bool {
	reply := make(chan bool, 1)
	ev.reply = reply
	if !m.send(ev) {
		return false
	}
	select {
	case ok := <-reply:
		return ok
	case <-m.done:
		return false
	}
}

// Stats is a snapshot of the master.
type Stats struct {
	Port                            int
	Project                         string
	TasksSubmitted, TasksWaiting    int
	TasksRunning, TasksComplete     int
	TasksCancelled, TasksFailed     int
	FastAborts, SpeculativeCopies   int
	WorkersConnected, WorkersJoined int
	WorkersRemoved, WorkersLost     int
	// WorkersReleased counts the workers released because their pool
	// gives this master fewer (see Config.Project).
	WorkersReleased          int
	CoresTotal, CoresInUse   float64
	MemoryTotal, MemoryInUse int64
	DiskTotal, DiskInUse     int64
	GPUsTotal, GPUsInUse     int64
	BytesSent, BytesReceived int64
	// Capacity is Eq. 4.5 over the recent tasks, CapacityWorkers seed
	// 003's form over the same tasks (the workers the master keeps busy:
	// Eq. 4.5 plus the one whose task is on the link), CapacityWeighted
	// the exponentially weighted form; all 0 until a task has finished.
	// CapacityTasks is what the master advertises of them.
	Capacity, CapacityWorkers, CapacityWeighted float64
	// ExecTime, TransferTime and ThinkTime are summed over finished tasks:
	// time on workers, moving files, and in the master's own bookkeeping.
	ExecTime, TransferTime, ThinkTime time.Duration
	Started                           time.Time
}

// CapacityTasks is the capacity the master advertises (capacity_tasks):
// the workers it keeps busy (CapacityWorkers; the weighted estimate before
// that has a value), in whole workers of one task — tasks at once, so a
// worker of k cores is k of them; 0 until a task has finished, which
// pools and factories read as "not reported". It counts workers, not
// Eq. 4.5's tasks moved while one runs, which is one fewer: a third of a
// capacity of 3 (bench/RESULTS.md). A master that measured less
// than one worker advertises 1, not 0: it can use one worker (seed 003
// never reports below 1), and a 0 would leave it sized by shares alone as
// if it had measured nothing.
func (s Stats) CapacityTasks() int {
	c := s.CapacityWorkers
	if c == 0 {
		c = s.CapacityWeighted
	}
	if c <= 0 || math.IsNaN(c) {
		return 0
	}
	return int(max(1, min(c, 1e9))) // +Inf: no measurable cost per task
}

// Stats returns a snapshot.
func (m *Master) Stats() Stats {
	reply := make(chan Stats, 1)
	if !m.send(evStats{reply}) {
		return Stats{}
	}
	select {
	case s := <-reply:
		return s
	case <-m.done:
		return Stats{}
	}
}

// WorkerStats is one connected worker, as Workers reports it.
type WorkerStats struct {
	Host              string // the name it gives
	Addr              string // where it connects from
	Cores, CoresInUse float64
	Running           int // tasks on it now
	Completed         int // tasks it finished
	FastAborts        int // its tasks aborted as stragglers
	// Draining: it gets no new tasks, being beyond its pool's decision,
	// and is released once it holds none (or, back straight after its
	// release, kept until it leaves or the decision has room).
	Draining bool
	Joined   time.Time
}

// Workers returns the connected workers, in the order they connected.
func (m *Master) Workers() []WorkerStats {
	reply := make(chan []WorkerStats, 1)
	if !m.send(evWorkers{reply}) {
		return nil
	}
	select {
	case ws := <-reply:
		return ws
	case <-m.done:
		return nil
	}
}

// Close stops the master: workers are released (so that they may serve
// the next master), connections closed, and unfinished tasks abandoned. It
// waits for the master's goroutines to end.
func (m *Master) Close() error {
	m.closeOnce.Do(func() {
		close(m.done)
		m.ln.Close()
	})
	m.loopWG.Wait()
	m.connWG.Wait()
	return nil
}

func (m *Master) send(e event) bool {
	select {
	case m.events <- e:
		return true
	case <-m.done:
		return false
	}
}

// deliver hands a finished task to Wait.
func (m *Master) deliver(r *Result) {
	m.rmu.Lock()
	m.results = append(m.results, r)
	m.outstanding.Add(-1)
	m.rmu.Unlock()
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

func (m *Master) accept() {
	var next sched.WorkerID
	for {
		if !m.waitForRoom() {
			return
		}
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.log.Error("accept", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		host := hostOf(conn.RemoteAddr())
		if !m.admit.admit(host) {
			m.notice(&m.refusals, "refused connection", "from", conn.RemoteAddr().String(),
				"reason", fmt.Sprintf("%d connections from this host are already in their handshake", m.admit.maxPerHost))
			conn.Close()
			continue
		}
		next++
		id := next
		m.connWG.Add(1)
		go func() {
			defer m.connWG.Done()
			defer m.admit.closed()
			m.handshake(id, conn, host)
		}()
	}
}

// waitForRoom waits until the master may accept another connection. It
// returns false when the master is closed.
func (m *Master) waitForRoom() bool {
	if m.admit.full() {
		a := m.admit
		m.notice(&m.fullness, "connection limit reached: new workers wait until a connection ends or finishes its handshake",
			"connections", a.maxConns, "handshakes", a.maxHandshakes, "handshake_timeout", m.cfg.HandshakeTimeout)
	}
	for m.admit.full() {
		select {
		case <-m.admit.room:
		case <-m.done:
			return false
		}
	}
	return true
}

// notice logs msg on Notices, at most as often as th allows.
func (m *Master) notice(th *throttle, msg string, args ...any) {
	ok, held := th.allow(time.Now())
	if !ok {
		return
	}
	if held > 0 {
		args = append(args, "notices_held_back", held)
	}
	m.cfg.Notices.Warn(msg, args...)
}

// handshake authenticates a new connection and reads its first message: a
// worker's hello, or a status client's query.
func (m *Master) handshake(id sched.WorkerID, conn net.Conn, host string) {
	conn = m.link.conn(conn)
	conn.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	// Close must not wait for a peer that is slow to say hello.
	handshaking := make(chan struct{})
	go func(raw net.Conn) {
		select {
		case <-m.done:
			raw.Close()
		case <-handshaking:
		}
	}(conn)
	over := func() {
		close(handshaking)
		m.admit.handshakeOver(host)
	}
	from := conn.RemoteAddr().String()
	fail := func(reason string, args ...any) {
		over()
		m.log.Warn("rejected connection", append([]any{"from", from, "reason", reason}, args...)...)
		conn.Close()
	}
	refuse := func(reason string, args ...any) {
		over()
		m.notice(&m.refusals, "refused connection", append([]any{"from", from, "reason", reason}, args...)...)
		conn.Close()
	}
	if m.cfg.TLS != nil {
		tc := tls.Server(conn, m.cfg.TLS)
		if err := tc.Handshake(); err != nil {
			if quiet(err) {
				fail("TLS handshake", "err", err)
			} else {
				refuse("TLS handshake failed", "err", err)
			}
			return
		}
		conn = tc
	}
	c := wire.NewConn(conn, m.cfg.Limits)
	if m.cfg.Password != nil {
		if err := c.AuthenticateServer(m.cfg.Password, &m.challenges); err != nil {
			if quiet(err) {
				fail("authentication", "err", err)
			} else {
				refuse("wrong or missing password", "err", err)
			}
			return
		}
	}
	msg, err := c.ReadMessage()
	if err != nil {
		if m.cfg.Password != nil && errors.Is(err, io.EOF) {
			// Proved the password and hung up: a worker pool's check
			// that this master holds it (package pool), repeated as
			// long as the pool runs.
			over()
			conn.Close()
			m.passwordChecked(host, from)
			return
		}
		fail("reading hello", "err", err)
		return
	}
	switch msg := msg.(type) {
	case wire.Hello:
		if msg.Protocol != wire.Protocol {
			fail("protocol mismatch", "protocol", msg.Protocol, "want", wire.Protocol)
			return
		}
		conn.SetDeadline(time.Time{})
		over()
		w := newWorkerConn(m, id, conn, c, msg)
		w.run()
	case wire.StatusQuery:
		over()
		reply := make(chan []byte, 1)
		if m.send(evStatus{kind: msg.Kind, reply: reply}) {
			select {
			case b := <-reply:
				conn.Write(b)
			case <-m.done:
			}
		}
		conn.Close()
	case wire.Auth:
		refuse("the worker has a password and this master has none")
	default:
		fail("unexpected first message", "message", fmt.Sprintf("%T", msg))
	}
}

// maxCheckers bounds the hosts whose password checks a master remembers
// having logged.
const maxCheckers = 256

// passwordChecked logs a password check from host (a peer that proved
// the password and hung up): at Info the first time host checks, at Debug
// after that, so that a pool's check every few minutes does not fill the
// log.
func (m *Master) passwordChecked(host, from string) {
	m.checkersMu.Lock()
	first := !m.checkers[host] && len(m.checkers) < maxCheckers
	if first {
		m.checkers[host] = true
	}
	m.checkersMu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelInfo
	}
	m.log.Log(context.Background(), level, "password checked: the peer proved it and hung up, as a worker pool's check does",
		"from", from)
}

// NoticeLogger returns a logger for Config.Notices that writes warnings to
// w as text lines without the time, for a person watching a terminal.
func NoticeLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// quiet reports whether a failed handshake is only a peer that went away
// or said nothing in time: worth a line in the log, not a notice.
func quiet(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}

// openFileLimit returns how many file descriptors this process may open.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 1024
	}
	return lim.Cur
}

// poolReadInterval is how often a master that a pool's workers serve reads
// the pools' decisions, when AdvertiseInterval is longer: a pool publishes
// its decision every 10 s (pool.Config.Interval), and a master that read it
// only with its own record, every 60 s, would let a pool's workers serve
// it for a minute after the pool gave them elsewhere.
const poolReadInterval = 5 * time.Second

// advertise sends the master's record to its catalogs every
// AdvertiseInterval, and in between, while workers of a pool serve it or a
// pool gives it workers, reads the pools' decisions every
// poolReadInterval.
func (m *Master) advertise() {
	tick := time.NewTicker(m.cfg.AdvertiseInterval)
	defer tick.Stop()
	var reads <-chan time.Time // nil: each record's read is soon enough
	if m.cfg.AdvertiseInterval > poolReadInterval {
		t := time.NewTicker(poolReadInterval)
		defer t.Stop()
		reads = t.C
	}
	enforcing := false // some pool has decided about this master
	send := true       // the record is due at the catalogs
	for {
		reply := make(chan []byte, 1)
		if !m.send(evStatus{kind: "catalog", reply: reply}) {
			return
		}
		var rec catalog.Record
		select {
		case b := <-reply:
			rec = decodeRecord(b)
		case <-m.done:
			return
		}
		if send {
			for _, addr := range m.cfg.Catalogs {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := catalog.Send(ctx, addr, m.cfg.CatalogNetwork, rec); err != nil {
					m.log.Warn("catalog update", "catalog", addr, "err", err)
				}
				cancel()
			}
		}
		if fromPools(rec) || enforcing {
			enforcing = m.readPoolDecisions(rec)
		}
		send = true
		select {
		case <-tick.C:
		case <-reads:
			send = false
		case <-m.queueFilled:
			if m.cfg.FirstTasksDelay > 0 {
				t := time.NewTimer(m.cfg.FirstTasksDelay)
				select {
				case <-t.C:
				case <-m.done:
					t.Stop()
					return
				}
			}
		case <-m.done:
			return
		}
	}
}

// fromPools reports whether a master's record counts workers of a pool.
func fromPools(rec catalog.Record) bool {
	for _, e := range strings.Split(rec.String("workers_by_pool"), ",") {
		if name, _, _ := strings.Cut(e, ":"); name != "" && name != "unmanaged" {
			return true
		}
	}
	return false
}

// readPoolDecisions asks the catalogs what the pools give this master,
// rec being its record, and has the loop enforce it (seed 000 §4.5.1). It
// reports whether any pool gives it workers; when no catalog answers, the
// last decisions stay.
func (m *Master) readPoolDecisions(rec catalog.Record) bool {
	self := enforce.Self{Name: rec.String("name"), Port: int(rec.Int("port"))}
	for _, addr := range m.cfg.Catalogs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		recs, err := catalog.Query(ctx, addr, `type=="`+enforce.PoolType+`"`)
		cancel()
		if err != nil {
			m.log.Warn("reading the pools' decisions", "catalog", addr, "err", err)
			continue
		}
		byPool := enforce.QuotasForMaster(m.pools.Read(recs), self)
		m.send(evPoolDecisions{byPool})
		return len(byPool) > 0
	}
	return true
}

func owner() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}
