package makeflow

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/internal/proc"
)

// LocalOptions configures a Local executor. The zero value is usable.
type LocalOptions struct {
	// Stdout and Stderr receive the commands' standard output and error;
	// nil discards them. An *os.File is handed to the commands directly.
	// Writes from concurrent commands are serialised.
	Stdout, Stderr io.Writer
	// Environ is the environment commands start from, before each rule's
	// own variables are added; nil means the process's environment.
	Environ []string
	// Shell runs the commands, as Shell -c command; default /bin/sh.
	Shell string
	// KillDelay is how long Cancel waits after SIGTERM before SIGKILL;
	// default 5 s.
	KillDelay time.Duration
	// Sandbox runs every rule in a sandbox, as a rule that renames files
	// runs (CCTools' --sandbox): its command sees only the files its rule
	// names.
	Sandbox bool
}

// stderrTail is how much of a command's standard error a Result keeps.
const stderrTail = 2048

// Local runs jobs as processes on this machine, each as Shell -c command in
// its own process group in the workflow's directory. The parent directories
// of a rule's targets are created before it starts.
//
// As GNU make does, a command that is a plain list of words (no quotes,
// variables, globs, redirections or other shell syntax, and not a shell
// builtin) is executed directly, found through the PATH it would get, sparing
// a shell start per rule; the shell would exec the same program with the
// same arguments and environment.
//
// A rule that renames files (local->remote) runs in a private sandbox
// directory holding links to its inputs under their remote names, and its
// outputs are moved back under their local names afterwards, as on a
// remote worker. Such a command sees only the files its rule names. With
// LocalOptions.Sandbox every rule runs so.
//
// A rule with a WALL_TIME is stopped like a cancelled one (SIGTERM, then
// SIGKILL) when it runs longer, and fails with a message that says so.
//
// When a command exits, whatever it left running in its process group is
// killed. Every process group is also registered with a keeper process
// (internal/proc) that kills it should this process die first, kill -9
// included, so that a killed makeflow leaves no job behind to race its
// re-run; Run has the keeper hold the log's lock until those jobs are gone.
// A process that leaves its group (setsid) is not followed.
//
// All the running commands are waited for together by one proc.Loop, as
// make waits for its children: one goroutine, parked in Go's poller, and no
// thread per command (on a kernel without pidfds, before Linux 5.3, each
// command is waited for on a goroutine of its own). Under Run, the exit of
// a command is handled on that goroutine when the driver is idle, and the
// rules it lets start are started there.
type Local struct {
	opts    LocalOptions
	results chan *Result
	devnull *os.File
	outMu   sync.Mutex // serialises writes to opts.Stdout and opts.Stderr

	base    []string
	baseIdx map[string]int
	envs    map[*string][]string // Rule.Env (by first element) -> full environment
	pwdEnvs map[pwdKey][]string  // environment and directory -> it with the shell's PWD

	mu    sync.Mutex
	procs map[*Job]*localProc

	keeper proc.Keeper
	// loop waits for every running command on one goroutine and reaps it:
	// no goroutine or thread per command. Its Result goes to take, or on
	// results.
	loop *proc.Loop
	// take, if set, is offered each result on the loop's goroutine before
	// it is sent on results; it reports whether it took it (Run's driver,
	// handling it there if it is idle).
	take atomic.Pointer[func(*Result) bool]
}

type localProc struct {
	job      *Job
	proc     *proc.Process
	sandbox  string
	canceled atomic.Bool
}

var _ Executor = (*Local)(nil)

// NewLocal returns a Local executor.
func NewLocal(opts LocalOptions) (*Local, error) {
	if opts.Shell == "" {
		opts.Shell = "/bin/sh"
	}
	if opts.KillDelay <= 0 {
		opts.KillDelay = 5 * time.Second
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	loop, err := proc.NewLoop()
	if err != nil {
		devnull.Close()
		return nil, fmt.Errorf("local executor: %w", err)
	}
	l := &Local{
		opts:    opts,
		results: make(chan *Result, 64),
		devnull: devnull,
		base:    opts.Environ,
		baseIdx: make(map[string]int, len(opts.Environ)),
		envs:    map[*string][]string{},
		pwdEnvs: map[pwdKey][]string{},
		procs:   map[*Job]*localProc{},
		loop:    loop,
	}
	for i, kv := range l.base {
		name, _, _ := strings.Cut(kv, "=")
		l.baseIdx[name] = i
	}
	return l, nil
}

// Results implements Executor.
func (l *Local) Results() <-chan *Result { return l.results }

// Close implements Executor.
func (l *Local) Close() error {
	l.loop.Close()
	l.keeper.Close()
	return l.devnull.Close()
}

// holdLock has the keeper hold f (the locked log) until every job this
// executor started is gone, should this process die; the returned function
// lets it go.
func (l *Local) holdLock(f *os.File) (release func() error, err error) {
	if err := l.keeper.Hold(f); err != nil {
		return nil, err
	}
	return func() error { return l.keeper.Hold() }, nil
}

// Submit implements Executor: it starts the job's command and returns its
// process id.
func (l *Local) Submit(job *Job) (int64, error) {
	lp := &localProc{job: job}
	dir := job.Dir
	if l.opts.Sandbox || needsSandbox(job.Rule) {
		sb, err := makeSandbox(job)
		if err != nil {
			return 0, err
		}
		lp.sandbox, dir = sb, sb
	} else if err := makeOutputDirs(job); err != nil {
		return 0, err
	}

	// Known before it starts: its Result may come before Start returns.
	l.mu.Lock()
	l.procs[job] = lp
	l.mu.Unlock()
	fail := func(err error) (int64, error) {
		l.mu.Lock()
		delete(l.procs, job)
		l.mu.Unlock()
		if lp.sandbox != "" {
			os.RemoveAll(lp.sandbox)
		}
		return 0, err
	}
	cmd := &proc.Cmd{
		Dir:        dir,
		Env:        l.env(job.Rule.Env),
		Stdin:      l.devnull,
		Stdout:     l.writer(l.opts.Stdout),
		Stderr:     l.writer(l.opts.Stderr),
		StderrTail: stderrTail,
		Keeper:     &l.keeper,
		WallTime:   wallTime(job),
		KillDelay:  l.opts.KillDelay,
		Loop:       l.loop,
		Exited:     func(pr *proc.Result) { l.exited(lp, pr) },
	}
	var p *proc.Process
	var err error
	if path, argv := directCommand(job.Command, cmd.Env, dir); path != "" {
		direct := *cmd
		direct.Path, direct.Args, direct.Env = path, argv, l.pwdEnv(cmd.Env, dir)
		// On any error the shell runs it instead, and fails the way the
		// user would expect (command not found, permission denied...).
		p, _ = direct.Start()
	}
	if p == nil {
		cmd.Path, cmd.Args = l.opts.Shell, []string{filepath.Base(l.opts.Shell), "-c", job.Command}
		if p, err = cmd.Start(); err != nil {
			return fail(fmt.Errorf("start %s: %w", l.opts.Shell, err))
		}
	}
	lp.proc = p // Cancel, which reads it, is not called while Submit runs (see Executor)
	return int64(p.Pid()), nil
}

// setTake has take offered every result before it is sent on the Results
// channel (nil: no longer).
func (l *Local) setTake(take func(*Result) bool) {
	if take == nil {
		l.take.Store(nil)
		return
	}
	l.take.Store(&take)
}

// writer returns w for the commands: an *os.File as it is, another writer
// behind the lock that serialises concurrent commands, nil as nil.
func (l *Local) writer(w io.Writer) io.Writer {
	switch w := w.(type) {
	case nil:
		return nil
	case *os.File:
		return w
	}
	return lockedWriter{&l.outMu, w}
}

// lockedWriter writes to w holding mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (lw lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// Cancel implements Executor: SIGTERM to the job's process group, then
// SIGKILL after KillDelay.
func (l *Local) Cancel(job *Job) {
	l.mu.Lock()
	lp := l.procs[job]
	l.mu.Unlock()
	if lp == nil || lp.canceled.Swap(true) {
		return
	}
	lp.proc.Terminate()
}

// wallTime is the job's WALL_TIME limit, or 0 for none.
func wallTime(job *Job) time.Duration {
	return time.Duration(job.Rule.Resources.WallTimeS) * time.Second
}

// exited sends the Result of a job whose command has ended. It runs on the
// loop's goroutine (without a pidfd, on one of the command's own), so a
// sandboxed job's outputs are moved back on another, not to hold up the
// other commands' exits.
func (l *Local) exited(lp *localProc, pr *proc.Result) {
	l.mu.Lock()
	delete(l.procs, lp.job)
	l.mu.Unlock()
	res := &Result{Job: lp.job, ExitCode: pr.ExitCode, Started: pr.Started, Ended: pr.Ended, Stderr: pr.StderrTail, Err: pr.Err,
		CPU:    time.Duration(pr.Usage.Utime.Nano() + pr.Usage.Stime.Nano()),
		MaxRSS: pr.Usage.Maxrss * 1024, // kilobytes on Linux
	}
	if pr.Signal != 0 {
		res.Signal = signalName(pr.Signal)
	}
	// A job that finished its work before the signal reached it is done,
	// not cancelled.
	finished := res.Err == nil && res.ExitCode == 0
	res.Canceled = lp.canceled.Load() && !finished
	if pr.TimedOut && !finished && !res.Canceled {
		res.Err = fmt.Errorf("stopped after running past its WALL_TIME of %v", wallTime(lp.job))
	}
	if take := l.take.Load(); take != nil && lp.sandbox == "" && (*take)(res) {
		return
	}
	if lp.sandbox != "" {
		go func() {
			if err := collectSandbox(lp.job, lp.sandbox, res.OK()); err != nil && res.OK() {
				res.Err = err
			}
			l.results <- res
		}()
		return
	}
	l.results <- res
}

// env returns the full environment for a rule's variables, computed once
// per distinct set (rules with equal variables share one Env slice).
func (l *Local) env(ruleEnv []string) []string {
	if len(ruleEnv) == 0 {
		return l.base
	}
	key := &ruleEnv[0]
	if e, ok := l.envs[key]; ok {
		return e
	}
	e := append([]string(nil), l.base...)
	for _, kv := range ruleEnv {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := l.baseIdx[name]; ok {
			e[i] = kv
		} else {
			e = append(e, kv)
		}
	}
	l.envs[key] = e
	return e
}

// makeOutputDirs creates the directories a job's targets go in.
func makeOutputDirs(job *Job) error {
	for _, f := range job.Rule.Targets {
		// Not cached: a directory made for one run may be cleaned away
		// before the next run with the same executor.
		d := filepath.Dir(f.Name)
		if d == "." {
			continue
		}
		if err := os.MkdirAll(inDir(job.Dir, d), 0o777); err != nil {
			return fmt.Errorf("create directory for %s: %w", f.Name, err)
		}
	}
	return nil
}

// inDir resolves a workflow file name against the workflow directory.
func inDir(dir, name string) string {
	if filepath.IsAbs(name) || dir == "" || dir == "." {
		return name
	}
	return filepath.Join(dir, name)
}

func needsSandbox(r *Rule) bool {
	for _, files := range [][]File{r.Sources, r.Targets} {
		for _, f := range files {
			if f.Remote != "" {
				return true
			}
		}
	}
	return false
}

// makeSandbox creates a directory for a job that renames files, with
// symbolic links to its inputs under their remote names.
func makeSandbox(job *Job) (string, error) {
	root, err := filepath.Abs(job.Dir)
	if err != nil {
		return "", err
	}
	sb, err := os.MkdirTemp(root, ".makeflow-sandbox-")
	if err != nil {
		return "", fmt.Errorf("create sandbox: %w", err)
	}
	for _, f := range job.Rule.Sources {
		src := inDir(root, f.Name)
		if _, err := os.Stat(src); err != nil {
			os.RemoveAll(sb)
			return "", fmt.Errorf("input %s: %w", f.Name, err)
		}
		dst := filepath.Join(sb, f.RemoteName())
		if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
			os.RemoveAll(sb)
			return "", err
		}
		if err := os.Symlink(src, dst); err != nil {
			os.RemoveAll(sb)
			return "", fmt.Errorf("link input %s as %s: %w", f.Name, f.RemoteName(), err)
		}
	}
	for _, f := range job.Rule.Targets {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(sb, f.RemoteName())), 0o777); err != nil {
			os.RemoveAll(sb)
			return "", err
		}
	}
	return sb, nil
}

// collectSandbox moves a sandboxed job's outputs back under their local
// names (if it succeeded) and removes the sandbox.
func collectSandbox(job *Job, sb string, ok bool) error {
	defer os.RemoveAll(sb)
	if !ok {
		return nil
	}
	var errs []error
	for _, f := range job.Rule.Targets {
		src := filepath.Join(sb, f.RemoteName())
		if _, err := os.Lstat(src); err != nil {
			continue // reported as a missing output by Run
		}
		dst := inDir(job.Dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
			errs = append(errs, err)
			continue
		}
		os.RemoveAll(dst)
		if err := os.Rename(src, dst); err != nil {
			errs = append(errs, fmt.Errorf("move output %s to %s: %w", f.RemoteName(), f.Name, err))
		}
	}
	return errors.Join(errs...)
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return fmt.Sprintf("%d (%v)", int(sig), sig)
}

// shellWords are the names a shell runs itself: builtins and keywords. A
// command starting with one of them always goes through the shell.
var shellWords = map[string]bool{
	".": true, ":": true, "[": true, "alias": true, "bg": true, "break": true, "cd": true, "chdir": true,
	"command": true, "continue": true, "echo": true, "eval": true, "exec": true, "exit": true,
	"export": true, "false": true, "fc": true, "fg": true, "getopts": true, "hash": true, "jobs": true,
	"kill": true, "local": true, "printf": true, "pwd": true, "read": true, "readonly": true,
	"return": true, "set": true, "shift": true, "test": true, "times": true, "trap": true, "true": true,
	"type": true, "ulimit": true, "umask": true, "unalias": true, "unset": true, "wait": true,
	"!": true, "case": true, "do": true, "done": true, "elif": true, "else": true, "esac": true,
	"fi": true, "for": true, "function": true, "if": true, "in": true, "then": true, "until": true,
	"while": true, "{": true, "}": true, "time": true, "select": true, "source": true,
}

// plainByte reports whether c means nothing special to the shell.
func plainByte(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
		c >= 0x80 || strings.IndexByte("-_./,:=+%@ ", c) >= 0
}

// directCommand returns the program and arguments to run cmd without a
// shell, or "" if cmd needs the shell or its program cannot be found (the
// shell then reports it). env is the command's environment and dir the
// directory it runs in.
func directCommand(cmd string, env []string, dir string) (string, []string) {
	for i := 0; i < len(cmd); i++ {
		if !plainByte(cmd[i]) {
			return "", nil
		}
	}
	argv := strings.Fields(cmd)
	if len(argv) == 0 || shellWords[argv[0]] || strings.Contains(argv[0], "=") {
		return "", nil
	}
	name := argv[0]
	if strings.Contains(name, "/") {
		return name, argv
	}
	path, ok := "", false
	for i := len(env) - 1; i >= 0; i-- {
		if v, found := strings.CutPrefix(env[i], "PATH="); found {
			path, ok = v, true
			break
		}
	}
	if !ok {
		return "", nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		candidate := d + "/" + name
		info, err := os.Stat(inDir(dir, candidate))
		if err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return candidate, argv
		}
	}
	return "", nil
}

type pwdKey struct {
	env *string // first element of the environment slice
	dir string
}

// pwdEnv returns env with PWD as /bin/sh would set it when started in dir
// (it keeps an inherited PWD that names dir, and otherwise sets the
// physical path), so that a directly executed command sees what it would
// under the shell.
func (l *Local) pwdEnv(env []string, dir string) []string {
	if len(env) == 0 {
		return env
	}
	key := pwdKey{&env[0], dir}
	if e, ok := l.pwdEnvs[key]; ok {
		return e
	}
	e := env
	idx, old := -1, ""
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PWD="); ok {
			idx, old = i, v
		}
	}
	target := dir
	if target == "" {
		target = "."
	}
	here, herr := os.Stat(target)
	there, terr := os.Stat(old)
	if herr == nil && !(filepath.IsAbs(old) && terr == nil && os.SameFile(here, there)) {
		if abs, err := filepath.Abs(target); err == nil {
			if phys, err := filepath.EvalSymlinks(abs); err == nil {
				e = append([]string(nil), env...)
				if idx >= 0 {
					e[idx] = "PWD=" + phys
				} else {
					e = append(e, "PWD="+phys)
				}
			}
		}
	}
	l.pwdEnvs[key] = e
	return e
}
