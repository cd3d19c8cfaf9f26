package workqueuecmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

type statusOptions struct {
	catalogs string
	project  string
	workers  bool
	tasks    bool
	long     bool
	timeout  time.Duration
}

func newStatusCmd(s cmdutil.Streams) *cobra.Command {
	o := statusOptions{timeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "status [flags] [HOST PORT | HOST:PORT]",
		Short: "list masters known to the catalog, or one master's workers and tasks",
		Long: `Without HOST PORT, lists the masters the catalog knows (as CCTools'
work_queue_status does). With HOST PORT, asks that master directly: its queue
(default), its workers (-W) or its tasks (-T).`,
		Args: cmdutil.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			switch len(args) {
			case 0:
				if o.workers || o.tasks {
					return cmdutil.Usagef("-W and -T need a master's HOST PORT")
				}
				return o.listMasters(ctx, s.Out)
			case 1:
				host, port, err := net.SplitHostPort(args[0])
				if err != nil {
					return cmdutil.Usagef("%s: give a master as HOST PORT or HOST:PORT", args[0])
				}
				return o.queryMasterAt(ctx, s.Out, host, port)
			default:
				return o.queryMasterAt(ctx, s.Out, args[0], args[1])
			}
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.catalogs, "catalog", "C", "", "catalog servers HOST:PORT[,HOST:PORT] (default $CATALOG_HOST:$CATALOG_PORT or localhost:9097)")
	f.StringVarP(&o.project, "project-name", "M", "", "only masters whose project matches this regular expression")
	f.BoolVarP(&o.workers, "workers", "W", false, "list the master's workers")
	f.BoolVarP(&o.tasks, "tasks", "T", false, "list the master's tasks")
	f.BoolVarP(&o.long, "verbose", "l", false, "print the records as JSON")
	f.VarP(cmdutil.Seconds(&o.timeout), "timeout", "t", "give up after this long")
	return cmd
}

func (o *statusOptions) listMasters(ctx context.Context, out io.Writer) error {
	var re *regexp.Regexp
	if o.project != "" {
		var err error
		if re, err = projectPattern("-M", o.project); err != nil {
			return err
		}
	}
	addrs := catalog.DefaultAddrs()
	if o.catalogs != "" {
		addrs = catalogAddrs(o.catalogs)
	}
	masters, err := catalog.FindMasters(ctx, addrs, re)
	if err != nil {
		return fmt.Errorf("no catalog answered (start one with 'workqueue catalog', name one with -C HOST:PORT, or ask a master directly: workqueue status HOST PORT)\n  %w",
			indented{err})
	}
	if o.long {
		rs := make([]catalog.Record, len(masters))
		for i, m := range masters {
			rs[i] = m.Record
		}
		return printJSON(out, rs)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tHOST\tPORT\tWAITING\tRUNNING\tCOMPLETE\tWORKERS\tCAPACITY")
	for _, m := range masters {
		r := m.Record
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", m.Project, m.Name, m.Port,
			r.Int("tasks_waiting"), r.Int("tasks_running"), r.Int("tasks_complete"), r.Int("workers"), capacityOf(r))
	}
	return tw.Flush()
}

func capacityOf(r catalog.Record) string {
	if _, ok := r["capacity_weighted"]; !ok {
		return "-"
	}
	return strconv.FormatFloat(r.Float("capacity_weighted"), 'f', 1, 64)
}

// queryMasterAt checks the port of a master given as HOST PORT and asks
// it.
func (o *statusOptions) queryMasterAt(ctx context.Context, out io.Writer, host, port string) error {
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return cmdutil.Usagef("bad port %q", port)
	}
	return o.queryMaster(ctx, out, net.JoinHostPort(host, port))
}

// queryMaster asks a master directly, as work_queue_status does: one line,
// then a JSON array until the master closes.
func (o *statusOptions) queryMaster(ctx context.Context, out io.Writer, addr string) error {
	kind := "queue"
	switch {
	case o.workers && o.tasks:
		return cmdutil.Usagef("give -W or -T, not both")
	case o.workers:
		kind = "worker"
	case o.tasks:
		kind = "task"
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("status of %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "%s_status\n", kind); err != nil {
		return fmt.Errorf("status of %s: %w", addr, err)
	}
	var recs []catalog.Record
	if err := json.NewDecoder(bufio.NewReader(io.LimitReader(conn, 64<<20))).Decode(&recs); err != nil {
		return fmt.Errorf("status of %s: bad answer: %w", addr, err)
	}
	if o.long {
		return printJSON(out, recs)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	switch kind {
	case "queue":
		fmt.Fprintln(tw, "PROJECT\tPORT\tWAITING\tRUNNING\tCOMPLETE\tFAILED\tWORKERS\tCORES\tCAPACITY")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%g/%g\t%s\n", r.String("project"), r.Int("port"),
				r.Int("tasks_waiting"), r.Int("tasks_running"), r.Int("tasks_complete"), r.Int("tasks_failed"),
				r.Int("workers"), r.Float("cores_inuse"), r.Float("cores_total"), capacityOf(r))
		}
	case "worker":
		fmt.Fprintln(tw, "HOST\tADDRESS\tCOMPLETED\tRUNNING\tCORES\tMEMORY\tDISK")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%g/%g\t%d/%d\t%d/%d\n", r.String("hostname"), r.String("address_port"),
				r.Int("total_tasks_complete"), r.Int("total_tasks_running"), r.Float("cores_inuse"), r.Float("cores_total"),
				r.Int("memory_inuse"), r.Int("memory_total"), r.Int("disk_inuse"), r.Int("disk_total"))
		}
	case "task":
		fmt.Fprintln(tw, "ID\tSTATE\tCATEGORY\tHOST\tCOMMAND")
		for _, r := range recs {
			cmd := r.String("command")
			if len(cmd) > 60 {
				cmd = cmd[:57] + "..."
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Int("taskid"), r.String("state"), r.String("category"), r.String("host"), cmd)
		}
	}
	return tw.Flush()
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// indented is an error of several lines (errors.Join's) with every line
// after the first indented, to be printed below a line that explains it.
type indented struct{ err error }

func (e indented) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", "\n  ") }
func (e indented) Unwrap() error { return e.err }
