package factory

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"

	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// maxStatusAnswer bounds what a master's status answer may hold.
const maxStatusAnswer = 16 << 20

// askMaster asks the master at addr for its queue status, as `workqueue
// status HOST PORT` does, over TLS when tc is set, authenticating first
// when password is set.
func askMaster(ctx context.Context, addr string, password []byte, tc *tls.Config) (Demand, error) {
	var d net.Dialer
	var conn net.Conn
	var err error
	if tc != nil {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return Demand{}, fmt.Errorf("asking master %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if password != nil {
		// The exchange is in lock step: once it is over, the master has
		// sent nothing more, so the raw connection can be read next.
		if err := wire.NewConn(conn, wire.Limits{}).AuthenticateClient(password, nil); err != nil {
			return Demand{}, fmt.Errorf("asking master %s: %w", addr, err)
		}
	}
	if _, err := conn.Write(wire.StatusQuery{Kind: "queue"}.AppendTo(nil)); err != nil {
		return Demand{}, fmt.Errorf("asking master %s: %w", addr, err)
	}
	var recs []catalog.Record
	if err := json.NewDecoder(io.LimitReader(conn, maxStatusAnswer)).Decode(&recs); err != nil {
		return Demand{}, fmt.Errorf("asking master %s: bad answer: %w", addr, err)
	}
	if len(recs) == 0 {
		return Demand{}, fmt.Errorf("asking master %s: empty answer", addr)
	}
	return demandOf(recs), nil
}

// askCatalogs asks the catalogs what the masters whose project matches
// project need.
func askCatalogs(ctx context.Context, catalogs []string, project *regexp.Regexp) (Demand, error) {
	masters, err := catalog.FindMasters(ctx, catalogs, project)
	if err != nil {
		return Demand{}, err
	}
	recs := make([]catalog.Record, len(masters))
	for i, m := range masters {
		recs[i] = m.Record
	}
	return demandOf(recs), nil
}

// demandOf sums what master records say, as CCTools' factory reads them:
// tasks waiting, plus tasks_left (the tasks a master says it has yet to
// submit), plus tasks on workers; their workers and the workers' cores;
// and each master's capacity_tasks, where it has one.
func demandOf(recs []catalog.Record) Demand {
	var d Demand
	for _, r := range recs {
		tasks, workers, capacity := RecordDemand(r)
		d.Masters++
		d.Tasks += tasks
		d.Workers += workers
		d.Cores += RecordCores(r)
		if capacity > 0 {
			d.Capacities = append(d.Capacities, MasterCapacity{Tasks: tasks, Capacity: capacity})
		}
	}
	return d
}

// RecordDemand reads what one master's record says it needs: its tasks
// (waiting, plus tasks_left, plus on workers), its workers connected, and
// its capacity_tasks (0 if it has not reported one).
func RecordDemand(r catalog.Record) (tasks, workers, capacity int) {
	running := count(r, "tasks_on_workers")
	if _, ok := r["tasks_on_workers"]; !ok {
		running = count(r, "tasks_running")
	}
	return count(r, "tasks_waiting") + count(r, "tasks_left") + running, count(r, "workers"), count(r, "capacity_tasks")
}

// RecordCores reads the cores of a master's connected workers from its
// record (cores_total), 0 if it does not say, kept below a billion as
// count keeps counts.
func RecordCores(r catalog.Record) float64 {
	v := r.Float("cores_total")
	if !(v > 0) { // NaN too
		return 0
	}
	return min(v, 1e9)
}

// count reads a count from a record, kept between 0 and a billion so that
// a master that sends nonsense cannot overflow the sums.
func count(r catalog.Record, key string) int {
	v := r.Float(key)
	if !(v > 0) { // NaN too
		return 0
	}
	return int(min(v, 1e9))
}
