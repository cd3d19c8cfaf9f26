package workqueuecmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/foreman"
	"github.com/rightsize/rightsize/workqueue/wire"
	"github.com/rightsize/rightsize/workqueue/worker"
)

type workerOptions struct {
	project      string
	catalogs     string
	cores        float64
	memory, disk int64
	gpus         int64
	workdir      string
	timeout      time.Duration
	idle         time.Duration
	connect      time.Duration
	minBackoff   time.Duration
	maxBackoff   time.Duration
	passwordFile string
	ssl          bool
	sslCA        string
	singleShot   bool
	features     []string
	pool         string
	followPool   bool
	billingCycle time.Duration
	wallTime     time.Duration
	parentDeath  bool
	debug        string // CCTools' -d SUBSYSTEM: any turns on debug logging
	debugFile    string
	version      bool
	log          logFlags

	// Foreman mode (CCTools' --foreman): the worker's tasks run on
	// workers of its own.
	foreman         bool
	foremanName     string
	foremanPort     string // PORT or LOW:HIGH
	foremanPortFile string
}

func newWorkerCmd(s cmdutil.Streams) *cobra.Command {
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker [flags] HOST PORT | HOST:PORT[;HOST:PORT...] | -M PROJECT",
		Short: "run tasks for a Work Queue master (rightsize or CCTools)",
		Long: `Connects to a master, by address or by project name through the catalog,
and runs its tasks, each in a new sandbox of its own under a fresh workspace,
set aside when the task ends (and removed once the worker is idle); whatever
it left running in its process group is killed.
Files the master marks cacheable are kept for later tasks; a task that writes
to one is run again with a copy of its own. Outputs are sent as regular files
and directories only: a symbolic link is reported, never followed. When the
master goes away the worker reconnects (to the next master of the project,
with -M) until --connect-timeout; it exits after --idle-timeout without work.

With --password the master must prove it knows the password too, however
the worker found it. --ssl connects over TLS (found with -M, a master that
advertises TLS is reached over TLS without it); --ssl-ca FILE also checks
that the master's certificate is FILE's or signed by one in FILE, so that
no other master can take the worker.

With --foreman the worker is a foreman (as CCTools' is): it runs no task
itself but offers its master what the workers connected to it offer
together, and runs each task on them through a master of its own. They
connect to --foreman-port (or LOW:HIGH; default any free port, written to
-Z FILE), or find it with -M NAME when -f NAME advertises it to the catalog;
they need the foreman's --password, if it has one. A cacheable file crosses
to the foreman once and from it to each of its workers once.`,
		Args: cmdutil.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.version {
				fmt.Fprintf(s.Out, "workqueue worker version %s (protocol %d)\n", worker.Version, wire.Protocol)
				return nil
			}
			o.foreman = o.foreman || o.foremanName != ""
			if !o.foreman && (o.foremanPort != "" || o.foremanPortFile != "") {
				return cmdutil.Usagef("--foreman-port and --foreman-port-file are for a foreman: add --foreman")
			}
			if o.parentDeath {
				if err := dieWithParent(); err != nil {
					return err
				}
			}
			// Before anything starts: a foreman would listen first.
			if err := cmdutil.CheckOutputPath("-o", o.debugFile); err != nil {
				return err
			}
			if err := cmdutil.CheckOutputPath("-Z", o.foremanPortFile); err != nil {
				return err
			}
			logOut := s.Err
			if o.debugFile != "" {
				f, err := os.OpenFile(o.debugFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					return fmt.Errorf("--debug-file: %w", err)
				}
				defer f.Close()
				logOut = f
			}
			o.log.debug = o.log.debug || o.debug != ""
			log := o.log.logger(logOut)
			cfg, err := o.config(args, func(msg string) { log.Warn(msg) })
			if err != nil {
				return err
			}
			cfg.Logger = log
			if o.foreman {
				fm, err := o.startForeman(cfg, log)
				if err != nil {
					return err
				}
				defer fm.Close()
				cfg.Foreman = fm
			}
			ctx := cmd.Context()
			if o.wallTime > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.wallTime)
				defer cancel()
			}
			err = worker.Run(ctx, cfg)
			switch {
			case errors.Is(err, worker.ErrIdle):
				return nil
			case o.wallTime > 0 && errors.Is(err, context.DeadlineExceeded):
				log.Info("wall time reached", "wall_time", o.wallTime)
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.project, "manager-name", "M", "", "project name (regular expression) to find masters through the catalog")
	f.StringVarP(&o.catalogs, "catalog", "C", "", "catalog servers HOST:PORT[,HOST:PORT] (default $CATALOG_HOST:$CATALOG_PORT or localhost:9097)")
	f.Float64Var(&o.cores, "cores", 0, "cores to offer (0: all)")
	f.Int64Var(&o.memory, "memory", 0, "memory to offer in MB (0: all)")
	f.Int64Var(&o.disk, "disk", 0, "disk to offer in MB (0: free space of the workdir)")
	f.Int64Var(&o.gpus, "gpus", 0, "GPUs to offer")
	f.StringVarP(&o.workdir, "workdir", "s", "", "where to create the workspace (default $TMPDIR or /tmp)")
	f.VarP(cmdutil.Seconds(&o.timeout), "timeout", "t", "set both --idle-timeout and --connect-timeout")
	f.Var(cmdutil.Seconds(&o.idle), "idle-timeout", "exit after this long without work (default 15m)")
	f.Var(cmdutil.Seconds(&o.connect), "connect-timeout", "exit after this long without a master (default 15m)")
	f.VarP(cmdutil.Seconds(&o.minBackoff), "min-backoff", "i", "first pause between connection attempts (default 1s)")
	f.VarP(cmdutil.Seconds(&o.maxBackoff), "max-backoff", "b", "longest pause between connection attempts (default 60s)")
	f.StringVarP(&o.passwordFile, "password", "P", "", "password `FILE` shared with the master")
	f.BoolVar(&o.ssl, "ssl", false, "connect to the master over TLS (as CCTools' --ssl: any certificate)")
	f.StringVar(&o.sslCA, "ssl-ca", "", "connect over TLS and trust only a master certificate in `FILE` or signed by one there")
	f.BoolVar(&o.singleShot, "single-shot", false, "exit after the first session with a master")
	f.StringArrayVar(&o.features, "feature", nil, "a user-defined feature to announce (repeatable)")
	f.StringVar(&o.pool, "from-factory", "", "the name of the worker pool or factory that started this worker, told to the master")
	f.BoolVar(&o.followPool, "follow-pool", false, "with --from-factory NAME: once its first master releases it, goes away or cannot be reached, choose each next master by pool NAME's decision in the catalog (-C), at random, weighted by the workers each may still take")
	f.Var(cmdutil.Seconds(&o.billingCycle), "billing-cycle", "leave only near the end of a billing cycle of this long, counted from the start, once idle or without a master (0: no cycle)")
	// CCTools' names, so that work_queue_factory --worker-binary and its
	// users' scripts can run this worker as they run work_queue_worker.
	f.StringVarP(&o.project, "master-name", "N", "", "same as -M")
	f.Var(cmdutil.Seconds(&o.wallTime), "wall-time", "exit after this long, whatever runs (0: never)")
	f.BoolVar(&o.parentDeath, "parent-death", false, "exit when the process that started the worker does")
	f.StringVarP(&o.debug, "debug", "d", "", "log every step; the value (CCTools' subsystem, e.g. all) is not used")
	f.StringVarP(&o.debugFile, "debug-file", "o", "", "write the log to `FILE` (appended) instead of standard error")
	f.BoolVarP(&o.version, "version", "v", false, "print the version and exit")
	f.BoolVarP(&o.log.quiet, "quiet", "q", false, "log only warnings and errors")
	f.BoolVar(&o.foreman, "foreman", false, "be a foreman: run the tasks on workers of its own, which connect to --foreman-port")
	f.StringVarP(&o.foremanName, "foreman-name", "f", "", "--foreman: advertise its master to the catalog under this project `NAME` (workers find it with -M NAME); implies --foreman")
	f.StringVar(&o.foremanPort, "foreman-port", "", "--foreman: the `PORT` (or LOW:HIGH, the first free one) its workers connect to (default: any free port)")
	f.StringVarP(&o.foremanPortFile, "foreman-port-file", "Z", "", "--foreman: write the port its workers connect to in `FILE`")
	return cmd
}

// dieWithParent has the kernel send SIGTERM to this process when its
// parent exits (--parent-death), and stops at once if it already has.
func dieWithParent() error {
	ppid := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("--parent-death: %w", err)
	}
	if os.Getppid() != ppid {
		return errors.New("--parent-death: the parent has already exited")
	}
	return nil
}

// config builds the worker's configuration; warn receives what the user
// should fix but that does not stop the worker.
func (o *workerOptions) config(args []string, warn func(string)) (worker.Config, error) {
	cfg := worker.Config{
		Project: o.project, Cores: o.cores, MemoryMB: o.memory, DiskMB: o.disk, GPUs: o.gpus,
		Workdir: o.workdir, IdleTimeout: o.idle, ConnectTimeout: o.connect,
		MinBackoff: o.minBackoff, MaxBackoff: o.maxBackoff, SingleShot: o.singleShot, Features: o.features,
		Pool: o.pool, FollowPool: o.followPool, BillingCycle: o.billingCycle,
	}
	if o.followPool && o.pool == "" {
		return cfg, cmdutil.Usagef("--follow-pool needs --from-factory NAME, the pool's name")
	}
	if o.timeout > 0 {
		cfg.IdleTimeout, cfg.ConnectTimeout = o.timeout, o.timeout
	}
	if o.minBackoff > 0 && o.maxBackoff > 0 && o.maxBackoff < o.minBackoff {
		return cfg, cmdutil.Usagef("-b/--max-backoff %v is shorter than -i/--min-backoff %v", o.maxBackoff, o.minBackoff)
	}
	if o.catalogs != "" {
		cfg.Catalogs = catalogAddrs(o.catalogs)
	}
	switch {
	case o.project != "" && len(args) > 0:
		return cfg, cmdutil.Usagef("give either -M PROJECT or a master address, not both")
	case o.project != "":
	case len(args) == 2:
		if _, err := strconv.ParseUint(args[1], 10, 16); err != nil {
			return cfg, cmdutil.Usagef("bad port %q", args[1])
		}
		cfg.Masters = []string{net.JoinHostPort(args[0], args[1])}
	case len(args) == 1:
		cfg.Masters = splitAddrs(args[0])
		for _, a := range cfg.Masters {
			_, port, err := net.SplitHostPort(a)
			if err == nil {
				_, err = strconv.ParseUint(port, 10, 16)
			}
			if err != nil {
				// Else the worker would retry a name it can never reach.
				return cfg, cmdutil.Usagef("bad master address %q (want HOST:PORT)", a)
			}
		}
	default:
		return cfg, cmdutil.Usagef("need a master: HOST PORT, HOST:PORT, or -M PROJECT")
	}
	for _, r := range []struct {
		flag string
		v    float64
	}{{"--cores", o.cores}, {"--memory", float64(o.memory)}, {"--disk", float64(o.disk)}, {"--gpus", float64(o.gpus)}} {
		if r.v < 0 {
			return cfg, cmdutil.Usagef("%s %g: must not be negative", r.flag, r.v)
		}
	}
	if o.project != "" {
		if _, err := projectPattern("-M", o.project); err != nil {
			return cfg, err
		}
	}
	if o.workdir != "" {
		if st, err := os.Stat(o.workdir); err != nil || !st.IsDir() {
			return cfg, cmdutil.Usagef("-s %s: not a directory", o.workdir)
		}
	}
	if o.passwordFile != "" {
		pw, err := wire.ReadPasswordFile(o.passwordFile, warn)
		if err != nil {
			return cfg, cmdutil.Usagef("--password: %w", err)
		}
		cfg.Password = pw
	}
	if o.ssl || o.sslCA != "" {
		tc, err := clientTLS(o.sslCA)
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

// clientTLS is wire.ClientTLS for --ssl (caFile "") or --ssl-ca: a CA file
// that cannot be read or holds no certificate is a usage error naming the
// flag.
func clientTLS(caFile string) (*tls.Config, error) {
	tc, err := wire.ClientTLS(caFile)
	if err != nil {
		return nil, cmdutil.Usagef("--ssl-ca: %w", err)
	}
	return tc, nil
}

// checkPasswordFile reads the --password file name, if any, so that one
// that cannot be read, or is empty, is a usage error naming the flag
// before anything starts; the library given its name reads it again when
// it needs it (and warns then if others can read it).
func checkPasswordFile(name string) error {
	if name == "" {
		return nil
	}
	if _, err := wire.ReadPasswordFile(name, nil); err != nil {
		return cmdutil.Usagef("--password: %w", err)
	}
	return nil
}

// projectPattern compiles the project pattern of flag, anchored as
// CCTools anchors it; a bad one is a usage error in the pattern's terms:
// "-M (: not a regular expression: missing closing )".
func projectPattern(flag, pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(" + pattern + ")$")
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			err = errors.New(se.Code.String())
		}
		return nil, cmdutil.Usagef("%s %s: not a regular expression: %v", flag, pattern, err)
	}
	return re, nil
}

// startForeman starts the master of a foreman (--foreman) for the worker
// of cfg: on --foreman-port, advertised as --foreman-name, its workers
// held to the worker's password.
func (o *workerOptions) startForeman(cfg worker.Config, log *slog.Logger) (*foreman.Foreman, error) {
	low, high, err := portRange(o.foremanPort)
	if err != nil {
		return nil, err
	}
	mcfg := workqueue.Config{Project: o.foremanName, Password: cfg.Password, Logger: log, Catalogs: cfg.Catalogs}
	var fm *foreman.Foreman
	for port := low; ; port++ {
		mcfg.Addr = ":" + strconv.Itoa(port)
		if fm, err = foreman.New(mcfg); err == nil || port >= high {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--foreman: %w", err)
	}
	log.Info("foreman listening for its workers", "port", fm.Port(), "project", o.foremanName)
	if o.foremanPortFile != "" {
		if err := os.WriteFile(o.foremanPortFile, []byte(strconv.Itoa(fm.Port())+"\n"), 0o644); err != nil {
			fm.Close()
			return nil, fmt.Errorf("--foreman-port-file: %w", err)
		}
	}
	return fm, nil
}

// portRange parses --foreman-port: PORT, LOW:HIGH, or "" for any free
// port (0).
func portRange(s string) (low, high int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	ls, hs, isRange := strings.Cut(s, ":")
	if !isRange {
		hs = ls
	}
	l, lerr := strconv.ParseUint(ls, 10, 16)
	h, herr := strconv.ParseUint(hs, 10, 16)
	if lerr != nil || herr != nil || h < l {
		return 0, 0, cmdutil.Usagef("--foreman-port %q: want PORT or LOW:HIGH", s)
	}
	return int(l), int(h), nil
}
