// Package workqueuecmd is the workqueue command: a Work Queue worker, a
// catalog server, status queries against catalogs and masters, a
// factory that keeps workers running on a batch system, a pool that
// shares them between masters by a policy (the two share their batch and
// worker options, batchWorkers), and a simulator of runs at scales this
// machine cannot run (model/sim). The
// behaviour lives in the workqueue packages; this package only parses flags
// and prints.
package workqueuecmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/suggest"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

// Main runs the workqueue command with args and returns its exit code.
func Main(ctx context.Context, args []string, s cmdutil.Streams) int {
	return cmdutil.Execute(ctx, Command(s), args, s)
}

// Command returns the workqueue command and its subcommands, for Main and
// for its manual pages.
func Command(s cmdutil.Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "workqueue",
		Short: "Work Queue workers, worker factory, catalog and status, compatible with CCTools; and a simulator",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				var names []string
				for _, c := range cmd.Commands() {
					if c.IsAvailableCommand() && c.Name() != "help" {
						names = append(names, c.Name())
					}
				}
				msg := fmt.Sprintf("unknown command %q (the commands are %s)", args[0], strings.Join(names, ", "))
				if near := suggest.Nearest(args[0], names); near != "" {
					msg = fmt.Sprintf("unknown command %q (did you mean %s?)", args[0], near)
				}
				return cmdutil.Usagef("%s", msg)
			}
			return cmd.Help()
		},
	}
	root.AddCommand(newWorkerCmd(s), newFactoryCmd(s), newPoolCmd(s), newCatalogCmd(s), newStatusCmd(s), newSimCmd(s))
	return root
}

// logFlags are the logging options every subcommand shares.
type logFlags struct {
	debug bool
	quiet bool
}

func (f *logFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.debug, "debug", "d", false, "log every step")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "log only warnings and errors")
}

func (f *logFlags) logger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	switch {
	case f.debug:
		level = slog.LevelDebug
	case f.quiet:
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// splitAddrs splits "host:port;host:port" (CCTools' form) or "host:port,...".
func splitAddrs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' })
}

// catalogAddrs splits -C's catalog servers as splitAddrs does; a host
// without a port is at the catalog's default port, as in $CATALOG_HOST
// (else "-C cat" would be asked on port 80).
func catalogAddrs(s string) []string {
	addrs := splitAddrs(s)
	for i, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			host := strings.TrimSuffix(strings.TrimPrefix(a, "["), "]") // "[::1]"
			addrs[i] = net.JoinHostPort(host, strconv.Itoa(catalog.DefaultPort))
		}
	}
	return addrs
}
