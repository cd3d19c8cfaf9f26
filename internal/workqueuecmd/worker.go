package workqueuecmd

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/internal/cmdutil"
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
	log          logFlags
}

func newWorkerCmd(s cmdutil.Streams) *cobra.Command {
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker [flags] HOST PORT | HOST:PORT[;HOST:PORT...] | -M PROJECT",
		Short: "run tasks for a Work Queue master (rightsize or CCTools)",
		Long: `Connects to a master, by address or by project name through the catalog,
and runs its tasks, each in a new sandbox of its own under a fresh workspace,
removed when the task ends with whatever it left running in its process group.
Files the master marks cacheable are kept for later tasks; a task that writes
to one is run again with a copy of its own. Outputs are sent as regular files
and directories only: a symbolic link is reported, never followed. When the
master goes away the worker reconnects (to the next master of the project,
with -M) until --connect-timeout; it exits after --idle-timeout without work.

With --password the master must prove it knows the password too, however
the worker found it. --ssl connects over TLS (found with -M, a master that
advertises TLS is reached over TLS without it); --ssl-ca FILE also checks
that the master's certificate is FILE's or signed by one in FILE, so that
no other master can take the worker.`,
		Args: cmdutil.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			log := o.log.logger(s.Err)
			cfg, err := o.config(args, func(msg string) { log.Warn(msg) })
			if err != nil {
				return err
			}
			cfg.Logger = log
			err = worker.Run(cmd.Context(), cfg)
			if errors.Is(err, worker.ErrIdle) {
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
	f.VarP(seconds{&o.timeout}, "timeout", "t", "set both --idle-timeout and --connect-timeout")
	f.Var(seconds{&o.idle}, "idle-timeout", "exit after this long without work (default 15m)")
	f.Var(seconds{&o.connect}, "connect-timeout", "exit after this long without a master (default 15m)")
	f.VarP(seconds{&o.minBackoff}, "min-backoff", "i", "first pause between connection attempts (default 1s)")
	f.VarP(seconds{&o.maxBackoff}, "max-backoff", "b", "longest pause between connection attempts (default 60s)")
	f.StringVarP(&o.passwordFile, "password", "P", "", "password file shared with the master")
	f.BoolVar(&o.ssl, "ssl", false, "connect to the master over TLS (as CCTools' --ssl: any certificate)")
	f.StringVar(&o.sslCA, "ssl-ca", "", "connect over TLS and trust only a master certificate in `FILE` or signed by one there")
	f.BoolVar(&o.singleShot, "single-shot", false, "exit after the first session with a master")
	f.StringArrayVar(&o.features, "feature", nil, "a user-defined feature to announce (repeatable)")
	o.log.add(cmd)
	return cmd
}

// config builds the worker's configuration; warn receives what the user
// should fix but that does not stop the worker.
func (o *workerOptions) config(args []string, warn func(string)) (worker.Config, error) {
	cfg := worker.Config{
		Project: o.project, Cores: o.cores, MemoryMB: o.memory, DiskMB: o.disk, GPUs: o.gpus,
		Workdir: o.workdir, IdleTimeout: o.idle, ConnectTimeout: o.connect,
		MinBackoff: o.minBackoff, MaxBackoff: o.maxBackoff, SingleShot: o.singleShot, Features: o.features,
	}
	if o.timeout > 0 {
		cfg.IdleTimeout, cfg.ConnectTimeout = o.timeout, o.timeout
	}
	if o.catalogs != "" {
		cfg.Catalogs = splitAddrs(o.catalogs)
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
			if _, _, err := net.SplitHostPort(a); err != nil {
				return cfg, cmdutil.Usagef("bad master address %q (want HOST:PORT)", a)
			}
		}
	default:
		return cfg, cmdutil.Usagef("need a master: HOST PORT, HOST:PORT, or -M PROJECT")
	}
	if o.cores < 0 || o.memory < 0 || o.disk < 0 || o.gpus < 0 {
		return cfg, cmdutil.Usagef("resources must not be negative")
	}
	if o.passwordFile != "" {
		pw, err := wire.ReadPasswordFile(o.passwordFile, warn)
		if err != nil {
			return cfg, fmt.Errorf("reading password: %w", err)
		}
		cfg.Password = pw
	}
	if o.ssl || o.sslCA != "" {
		tc, err := wire.ClientTLS(o.sslCA)
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tc
	}
	return cfg, nil
}
