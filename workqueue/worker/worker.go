// Package worker is a Work Queue worker: it connects to a master (given by
// address, or found by project name through a catalog), receives files into
// a cache, runs each task's command in a sandbox of its own, and sends back
// results and output files. It speaks protocol 9, so it serves both the
// rightsize master and Debian's CCTools masters (makeflow -T wq and others).
// With a password it serves only a master that proves it knows it, and
// with TLS and a trusted certificate only the master that holds its key.
//
// Nothing a master sends makes the worker itself read or write outside
// its workspace: cache names must be single path elements, sandbox names
// relative paths without "..", and the worker reaches every file it makes,
// moves or reads there through open directories, following no symbolic
// link (a link in an output is reported missing, not sent). Each task gets
// a fresh sandbox, moved to a trash when it ends (and removed once the
// worker is idle, the trash is full, or the session ends), and whatever it
// left running in its process group is killed. Cached inputs reach tasks as hard links to
// copies the worker watches, never the cache's own files: a task that
// writes to one is given back to the master to run again, with the tasks
// that held it, and later tasks get a copy of their own.
//
// It does not contain the commands it runs: they run as the worker's user
// and can do whatever that user can, outside the workspace too. It does
// not schedule, retry or decide anything: the master does. It can be told
// to drain (Config.Drain): it then tells the master it has no room left
// and takes no more tasks. With a Foreman (Config.Foreman) it runs no
// command itself: the foreman's own workers do. A worker of a pool that
// follows it (Config.FollowPool) chooses its next master by the pool's
// decision in the catalog (package enforce).
package worker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/rightsize/rightsize/internal/proc"
	"github.com/rightsize/rightsize/model"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// Config says where a worker connects and what it offers. The zero value of
// each field means its documented default.
type Config struct {
	// Masters are "host:port" addresses, tried in turn. Leave empty to find
	// masters through Catalogs by Project.
	Masters []string
	// Project is a regular expression matched against the project names of
	// masters the catalog knows (anchored, as CCTools does).
	Project string
	// Catalogs are the catalog servers ("host:port") asked for Project.
	// Default: $CATALOG_HOST:$CATALOG_PORT, else localhost:9097.
	Catalogs []string

	// Cores, MemoryMB, DiskMB and GPUs are the resources offered. Zero means
	// measure: all CPUs, all memory, the free disk under Workdir, no GPUs.
	Cores    float64
	MemoryMB int64
	DiskMB   int64
	GPUs     int64

	// Workdir is where the workspace directory is created (default: the
	// system temporary directory).
	Workdir string
	// IdleTimeout ends the worker when it has had no task for this long
	// (default 15 minutes).
	IdleTimeout time.Duration
	// ConnectTimeout ends the worker when no master could be reached for
	// this long (default 15 minutes).
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause between connection attempts
	// (defaults 1 s and 60 s).
	MinBackoff, MaxBackoff time.Duration
	// Password, if set, is the password file's content for the CCTools
	// challenge (see wire.ReadPasswordFile); the master must hold the same
	// one, however the worker found it. The worker answers the master's
	// challenge first, as CCTools masters expect, but never one of its own
	// challenges sent back to it.
	Password []byte
	// TLS, if set, makes the worker connect to every master over TLS (see
	// wire.ClientTLS). Without it, the worker uses TLS (without checking
	// the certificate, as CCTools does) only with masters whose catalog
	// record says "ssl": true.
	TLS *tls.Config
	// Pool, if set, is the name of the worker pool that started the worker,
	// told to the master ("info from-factory", as CCTools' factory does),
	// which counts the workers of each pool (workers_by_pool).
	Pool string
	// FollowPool, with Pool, makes the worker choose its masters by the
	// pool's decision (seed 000 §4.5.2) once its first master has released
	// it, gone away or could not be reached: it reads the pool's record
	// from Catalogs and picks one of the pool's masters at random,
	// weighted by the workers each may still take from the pool (package
	// enforce), never at once the one that released it. While the
	// catalogs hold no decision of the pool (or none answers), it connects
	// to Masters (or Project's) as without it.
	FollowPool bool
	// BillingCycle, if set, is the period the worker's resources are
	// billed by: a worker whose idle or connect timeout has passed leaves
	// only near the end of a cycle counted from its start (in the last
	// tenth of it, at most its last minute), having paid for the rest
	// (seed 000 §4.4.3).
	BillingCycle time.Duration
	// SingleShot ends the worker after its first session with a master.
	SingleShot bool
	// Features are user-defined features announced to the master.
	Features []string
	// Drain, once closed, makes the worker take no more tasks: it tells
	// its master that it has no resources left and finishes the tasks it
	// holds. It stays connected, for the master to fetch their outputs,
	// until released, told to exit, idle or cancelled.
	Drain <-chan struct{}
	// Logger receives the worker's log (default: discarded).
	Logger *slog.Logger
	// Ready, if set, is called once with the workspace path when the worker
	// has set up and is about to connect.
	Ready func(workspace string)
	// InProcess, if set, is asked first for each task: it returns a
	// function that does the task's work in this process instead of its
	// command, leaving its outputs in sandbox, or nil to run the command.
	// A master's own worker, in the master's process, so does the jobs
	// whose work the master has at hand (batch/wq's Driver.InProcess). An
	// error fails the task with exit status 1 and the error as its output.
	InProcess func(spec *wire.TaskSpec) func(ctx context.Context, sandbox string) error
	// Foreman, if set, runs the tasks on workers of its own instead of
	// here: the worker is then a foreman, and offers its master what the
	// foreman's workers offer, not this machine's resources.
	Foreman Foreman
}

// A Foreman runs a worker's tasks on workers of its own, as CCTools'
// foreman does: a master for the workers behind it, in front of a cluster.
// Package workqueue/foreman has one.
type Foreman interface {
	// Run runs task t and returns how it ended, once it has ended or ctx
	// is done (the task killed). Its inputs are placed in t.Sandbox under
	// their remote names, and those the master caches are also in
	// t.CacheDir under their cache names, where they stay from task to
	// task; its outputs are to be left in t.Sandbox under their remote
	// names.
	Run(ctx context.Context, t ForemanTask) ForemanResult
	// Offer returns what the foreman's workers offer now.
	Offer() Offer
	// OfferChanged receives a value when Offer may have changed.
	OfferChanged() <-chan struct{}
}

// A ForemanTask is a task a Foreman runs.
type ForemanTask struct {
	Spec     *wire.TaskSpec
	Sandbox  string
	CacheDir string
}

// A ForemanResult is how a task a Foreman ran ended.
type ForemanResult struct {
	// Ran says the command ran: Exit is then its exit status, or Signal
	// the signal that killed it, and TimedOut says it was killed at its
	// wall time. Output is its standard output and error, Exec its
	// running time.
	Ran      bool
	Exit     int
	Signal   int
	TimedOut bool
	Output   []byte
	Exec     time.Duration
	// InputMissing says an input could not be sent; Retry that the
	// foreman's workers could not run the task (lost, or gave it back)
	// and it should run again. Err says why.
	InputMissing, Retry bool
	Err                 error
}

// An Offer is what a foreman's workers offer together.
type Offer struct {
	Workers          int
	Cores            float64
	MemoryMB, DiskMB int64
	GPUs             int64
}

// Version is what the worker reports as its version in its hello line.
const Version = "rightsize"

func (c *Config) validate() error {
	if len(c.Masters) == 0 && c.Project == "" {
		return errors.New("need a master address or a project name")
	}
	if c.FollowPool && c.Pool == "" {
		return errors.New("following a pool needs the pool's name")
	}
	if c.Project != "" {
		if _, err := regexp.Compile("^(" + c.Project + ")$"); err != nil {
			return fmt.Errorf("project pattern: %w", err)
		}
	}
	if (c.Project != "" || c.FollowPool) && len(c.Catalogs) == 0 {
		c.Catalogs = catalog.DefaultAddrs()
	}
	if c.Cores < 0 || c.MemoryMB < 0 || c.DiskMB < 0 || c.GPUs < 0 {
		return errors.New("resources must not be negative")
	}
	if c.Workdir == "" {
		c.Workdir = os.TempDir()
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 15 * time.Minute
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 15 * time.Minute
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(60*time.Second, c.MinBackoff)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ErrIdle is returned by Run when the worker stopped because it had no work
// for Config.IdleTimeout.
var ErrIdle = errors.New("idle timeout")

// Run runs a worker until ctx is cancelled, the idle or connect timeout
// passes, a master tells it to exit, or (SingleShot) its first session ends.
// It returns nil when told to exit or when a single-shot session ends with
// a release, the session's error when a single-shot session ends otherwise,
// ErrIdle after the idle timeout, and ctx's error when cancelled.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	res, err := measure(cfg)
	if err != nil {
		return err
	}
	ws, err := os.MkdirTemp(cfg.Workdir, fmt.Sprintf("worker-%d-%d-", os.Getuid(), os.Getpid()))
	if err != nil {
		return fmt.Errorf("creating workspace: %w", err)
	}
	// Should the worker die, kill -9 included, its keeper kills what the
	// tasks run and removes the workspace. (Deferred first, so that it
	// closes after the workspace is cleaned below.)
	keeper := &proc.Keeper{}
	defer keeper.Close()
	if err := keeper.AddDir(ws); err != nil {
		os.Remove(ws)
		return fmt.Errorf("workspace %s: %w", ws, err)
	}
	// Held open: whatever happens to its path, the worker works below the
	// directory it made.
	wsDir, err := os.Open(ws)
	if err != nil {
		os.Remove(ws)
		return fmt.Errorf("opening workspace: %w", err)
	}
	defer func() {
		cleanWorkspace(wsDir)
		wsDir.Close()
		os.Remove(ws)
	}()
	log := cfg.Logger
	log.Info("workspace created", "dir", ws, "cores", res.cores, "memory_mb", res.memoryMB, "disk_mb", res.diskMB, "gpus", res.gpus)
	if cfg.Ready != nil {
		cfg.Ready(ws)
	}
	id := make([]byte, 16)
	rand.Read(id)
	w := &worker{cfg: cfg, started: time.Now(), log: log, res: res, workspace: wsDir, id: "worker-" + hex.EncodeToString(id), keeper: keeper}
	return w.loop(ctx)
}

type resources struct {
	cores            float64
	memoryMB, diskMB int64
	gpus             int64
}

func measure(cfg Config) (resources, error) {
	r := resources{cores: cfg.Cores, memoryMB: cfg.MemoryMB, diskMB: cfg.DiskMB, gpus: cfg.GPUs}
	m, err := model.Probe(cfg.Workdir)
	if err != nil && r.diskMB == 0 {
		return r, fmt.Errorf("measuring this machine: %w", err)
	}
	if r.cores == 0 {
		r.cores = float64(m.Cores)
	}
	if r.memoryMB == 0 {
		r.memoryMB = m.MemoryMB
		if r.memoryMB == 0 {
			r.memoryMB = 1024 // a machine that does not say
		}
	}
	if r.diskMB == 0 {
		r.diskMB = m.DiskMB
	}
	return r, nil
}

type worker struct {
	cfg       Config
	started   time.Time
	log       *slog.Logger
	res       resources
	workspace *os.File
	id        string
	keeper    *proc.Keeper
	issued    wire.Challenges // challenges sent to masters: never answered

	// byPool: the next master is chosen by the pool's decision
	// (FollowPool), not avoid, the master that released the worker last.
	byPool bool
	avoid  string
	// said holds the problems said since the last session with a master
	// ("resolve NAME", "not a master ADDR"), so that each is said once,
	// not at every retry.
	said map[string]bool

	// testHookWatch, if set, is called as each session's watch starts,
	// before it looks at Config.Drain: tests use it to close Drain at the
	// moment they choose.
	testHookWatch func()
}

// CycleEnding says whether a worker started at started and billed by
// periods of cycle may leave at now: at any time without a cycle, else in
// the last tenth of a cycle, at most its last minute.
func CycleEnding(started, now time.Time, cycle time.Duration) bool {
	if cycle <= 0 {
		return true
	}
	into := now.Sub(started) % cycle
	return into >= cycle-min(cycle/10, time.Minute)
}

// errExit and errRelease end a session at the master's request.
var (
	errExit    = errors.New("master said exit")
	errRelease = errors.New("master released the worker")
)

// loop connects, serves a session, and reconnects until told to stop.
func (w *worker) loop(ctx context.Context) error {
	backoff := w.cfg.MinBackoff
	lastSession := time.Now()
	for {
		conn, addr, err := w.connect(ctx)
		w.byPool, w.avoid = w.cfg.FollowPool, ""
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Since(lastSession) > w.cfg.ConnectTimeout && CycleEnding(w.started, time.Now(), w.cfg.BillingCycle) {
				return fmt.Errorf("no master reachable for %v: %w", w.cfg.ConnectTimeout, err)
			}
			if !w.sayUnresolved(err) && w.once("no master") {
				// Once, so that the user knows the worker waits, and why.
				w.log.Info("no master yet; retrying quietly", "err", err, "gives_up_after", w.cfg.ConnectTimeout)
			}
			w.log.Debug("no master", "err", err, "retry_in", backoff)
			if err := w.backOff(ctx, &backoff); err != nil {
				return err
			}
			continue
		}
		if w.said["not accepted by "+addr] {
			w.log.Debug("connected", "master", addr)
		} else {
			w.log.Info("connected", "master", addr)
		}
		err = w.session(ctx, conn)
		var notAccepted *notAcceptedError
		if !errors.As(err, &notAccepted) {
			lastSession = time.Now()
			clear(w.said)
		}
		if cerr := cleanWorkspace(w.workspace); cerr != nil {
			return cerr
		}
		switch {
		case notAccepted != nil && ctx.Err() == nil:
			// As an address where nothing listens: retried less and less
			// often, until the connect timeout.
			if w.cfg.SingleShot {
				return fmt.Errorf("session with %s: %w", addr, err)
			}
			if w.once("not accepted by " + addr) {
				attrs := []any{"master", addr, "gives_up_after", w.cfg.ConnectTimeout}
				if notAccepted.err != errNeedPassword {
					attrs = append(attrs, "err", notAccepted.err)
				}
				w.log.Warn(notAccepted.why+"; retrying quietly", attrs...)
			}
			if time.Since(lastSession) > w.cfg.ConnectTimeout && CycleEnding(w.started, time.Now(), w.cfg.BillingCycle) {
				return fmt.Errorf("no master accepted the worker for %v: %s: %w", w.cfg.ConnectTimeout, addr, notAccepted)
			}
			w.log.Debug("not accepted", "master", addr, "err", notAccepted, "retry_in", backoff)
			if err := w.backOff(ctx, &backoff); err != nil {
				return err
			}
			continue
		case errors.Is(err, errExit):
			w.log.Info("master said exit", "master", addr)
			return nil
		case errors.Is(err, ErrIdle):
			w.log.Info("idle timeout", "after", w.cfg.IdleTimeout)
			return ErrIdle
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errRelease):
			w.log.Info("released", "master", addr)
			backoff = 0 // reconnect at once, as CCTools does after release
			w.avoid = addr
		default:
			w.log.Warn("disconnected", "master", addr, "reason", err)
			backoff = w.cfg.MinBackoff
		}
		if w.cfg.SingleShot {
			if errors.Is(err, errRelease) {
				return nil
			}
			return fmt.Errorf("session with %s: %w", addr, err)
		}
		if backoff == 0 {
			backoff = w.cfg.MinBackoff
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// connect dials the first reachable master, over TLS when Config.TLS is
// set or the master's catalog record says so.
func (w *worker) connect(ctx context.Context) (net.Conn, string, error) {
	if w.byPool {
		if t, found, err := w.poolTarget(ctx); found {
			if err != nil {
				return nil, "", err
			}
			conn, err := w.dial(ctx, t)
			return conn, t.addr, err
		}
	}
	targets := make([]target, len(w.cfg.Masters))
	for i, a := range w.cfg.Masters {
		targets[i] = target{addr: a}
	}
	if w.cfg.Project != "" {
		found, err := w.lookup(ctx)
		if err != nil {
			return nil, "", err
		}
		targets = found
	}
	var errs []error
	for _, t := range targets {
		conn, err := w.dial(ctx, t)
		if err == nil {
			return conn, t.addr, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, "", fmt.Errorf("no master for project %q in catalogs %v", w.cfg.Project, w.cfg.Catalogs)
	}
	return nil, "", errors.Join(errs...)
}

// target is a master to try.
type target struct {
	addr string
	ssl  bool // its catalog record says it wants TLS
}

func (w *worker) dial(ctx context.Context, t target) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	cfg := w.cfg.TLS
	if cfg == nil && !t.ssl {
		return conn, nil
	}
	if cfg == nil {
		cfg = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	tc := tls.Client(conn, cfg)
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("TLS with %s: %w", t.addr, err)
	}
	return tc, nil
}

// lookup asks the catalogs for masters whose project matches, newest first.
func (w *worker) lookup(ctx context.Context) ([]target, error) {
	re := regexp.MustCompile("^(" + w.cfg.Project + ")$")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	masters, err := catalog.FindMasters(ctx, w.cfg.Catalogs, re)
	targets := make([]target, len(masters))
	for i, m := range masters {
		ssl, _ := m.Record["ssl"].(bool)
		targets[i] = target{addr: m.Addr(), ssl: ssl}
	}
	return targets, err
}

// poolTarget picks the next master by the pool's decision in the first
// catalog that answers: found is false when it holds none, or none
// answers; err, when found, says that no master has room.
func (w *worker) poolTarget(ctx context.Context) (t target, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, addr := range w.cfg.Catalogs {
		recs, err := catalog.Query(ctx, addr, "")
		if err != nil {
			w.log.Debug("reading the pool's decision", "catalog", addr, "err", err)
			continue
		}
		slots, found := enforce.Slots(w.cfg.Pool, recs, w.cfg.Password)
		if !found {
			return t, false, nil
		}
		slots = slices.DeleteFunc(slots, func(s enforce.Slot) bool { return s.Addr == w.avoid })
		i := enforce.Choose(slots, mrand.Float64())
		if i < 0 {
			return t, true, fmt.Errorf("no master of pool %s may take another of its workers", w.cfg.Pool)
		}
		w.log.Debug("master chosen by the pool's decision", "pool", w.cfg.Pool, "master", slots[i].Addr, "slots", slots)
		return target{addr: slots[i].Addr, ssl: slots[i].SSL}, true, nil
	}
	return t, false, nil
}

// sayUnresolved warns, once for each host name, that a name in err (a
// master's or a catalog's) does not resolve: the worker keeps retrying
// until the connect timeout, at the debug level, and a mistyped name would
// otherwise look like a master not yet started. It reports whether err
// holds any such name.
func (w *worker) sayUnresolved(err error) bool {
	names := dnsErrors(err)
	for _, e := range names {
		if !w.once("resolve " + e.Name) {
			continue
		}
		w.log.Warn("host name does not resolve; retrying quietly", "host", e.Name, "err", e, "gives_up_after", w.cfg.ConnectTimeout)
	}
	return len(names) > 0
}

// backOff waits *backoff before the next connection attempt, or until ctx
// ends (its error), and doubles *backoff, up to MaxBackoff.
func (w *worker) backOff(ctx context.Context, backoff *time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*backoff):
	}
	*backoff = min(2**backoff, w.cfg.MaxBackoff)
	return nil
}

// once reports whether problem is to be said: the first time since the
// last session.
func (w *worker) once(problem string) bool {
	if w.said[problem] {
		return false
	}
	if w.said == nil {
		w.said = map[string]bool{}
	}
	w.said[problem] = true
	return true
}

// A notAcceptedError ends a session before the master accepted the
// worker: the peer's first message was not Work Queue's (an HTTP server,
// say, on the port given), or it wants a password the worker has not, or
// refused the worker's. Why says which.
type notAcceptedError struct {
	why string
	err error
}

func (e *notAcceptedError) Error() string {
	if e.err == errNeedPassword {
		return e.why
	}
	return e.why + ": " + e.err.Error()
}
func (e *notAcceptedError) Unwrap() error { return e.err }

// errNeedPassword: the master asked for a password the worker was not given.
var errNeedPassword = errors.New("the master requires a password")

// dnsErrors returns the DNS errors in err's tree (errors.Join's branches
// included), one for each host name.
func dnsErrors(err error) []*net.DNSError {
	var found []*net.DNSError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *net.DNSError:
			if e.Name != "" && !slices.ContainsFunc(found, func(f *net.DNSError) bool { return f.Name == e.Name }) {
				found = append(found, e)
			}
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		default:
			walk(errors.Unwrap(err))
		}
	}
	walk(err)
	return found
}

// wholeCores is the core count as reported: CCTools masters read whole
// numbers, and a fraction of a core still offers one.
func wholeCores(v float64) float64 { return math.Max(1, math.Floor(v)) }

// draining reports whether Config.Drain is closed.
func (w *worker) draining() bool {
	select {
	case <-w.cfg.Drain:
		return true
	default:
		return false
	}
}
