package workqueuecmd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

func newCatalogCmd(s cmdutil.Streams) *cobra.Command {
	var (
		port     int
		iface    string
		lifetime time.Duration
		portFile string
		log      logFlags
	)
	cmd := &cobra.Command{
		Use:   "catalog [flags]",
		Short: "run a catalog server that masters report to and workers and status query",
		Long: `Accepts master updates as JSON over UDP on --port and over TCP on the port
above (as CCTools' catalog_server does), and answers HTTP queries on --port:
/query.json, /query/<base64 filter>, and a text summary at /.

It believes whoever sends a record, as CCTools' does, but bounds what it
keeps so that its answer stays readable and its memory bounded: a record of
at most 64 KiB of JSON (a CCTools master's is about 2.4 KB), at most 100
records per sending address, 16 MiB of memory per /24 (or /64) subnet and
64 MiB in all, a record's memory estimated from what it holds (from 2.2 to
15 times its JSON; about 34,000 records of 400 bytes fit). Beyond a bound, a
new record replaces the oldest record heard only once; masters that
advertise at their interval, and those heard over TCP, are kept through a
flood of new records from any number of addresses. A record heard over TCP
is not updated over UDP, whose source address anyone can spoof.`,
		Args: cmdutil.ExactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 0 || port > 65534 {
				return cmdutil.Usagef("-p/--port %d: not a port", port)
			}
			srv, err := catalog.Listen(catalog.ServerConfig{
				Addr:     net.JoinHostPort(iface, strconv.Itoa(port)),
				Lifetime: lifetime,
				Logger:   log.logger(s.Err),
			})
			if err != nil {
				return err
			}
			if portFile != "" {
				if err := os.WriteFile(portFile, []byte(strconv.Itoa(srv.Port())+"\n"), 0o644); err != nil {
					return err
				}
			}
			fmt.Fprintf(s.Err, "workqueue catalog: listening on port %d (UDP and HTTP), %d (TCP updates)\n", srv.Port(), srv.Port()+1)
			return srv.Serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.IntVarP(&port, "port", "p", catalog.DefaultPort, "port for UDP updates and HTTP queries (TCP updates on the next); 0 picks one")
	f.StringVarP(&iface, "interface", "I", "", "listen only on this address")
	f.VarP(cmdutil.Seconds(&lifetime), "lifetime", "l", "how long a record lives without updates (default 30m)")
	f.StringVarP(&portFile, "port-file", "Z", "", "write the chosen port to this file")
	log.add(cmd)
	return cmd
}
