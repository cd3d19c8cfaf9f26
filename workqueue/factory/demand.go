package factory

import (
	"context"
	"encoding/json"
	"errors"
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
// status HOST PORT` does, authenticating first when password is set.
func askMaster(ctx context.Context, addr string, password []byte) (Demand, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
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
		if _, err := wire.NewConn(conn, wire.Limits{}).Authenticate(password); err != nil {
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

// askCatalogs asks the catalogs, in turn until one answers, for the masters
// whose project matches project.
func askCatalogs(ctx context.Context, catalogs []string, project *regexp.Regexp) (Demand, error) {
	var errs []error
	for _, addr := range catalogs {
		recs, err := catalog.Query(ctx, addr, `type=="wq_master" or type=="wq_manager"`)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var mine []catalog.Record
		for _, m := range catalog.Masters(recs) {
			if project.MatchString(m.Project) {
				mine = append(mine, m.Record)
			}
		}
		return demandOf(mine), nil
	}
	if len(errs) == 0 {
		return Demand{}, errors.New("no catalog to ask")
	}
	return Demand{}, errors.Join(errs...)
}

// demandOf sums what master records say, as CCTools' factory reads them:
// tasks waiting, plus tasks_left (the tasks a master says it has yet to
// submit), plus tasks on workers.
func demandOf(recs []catalog.Record) Demand {
	var d Demand
	for _, r := range recs {
		running := count(r, "tasks_on_workers")
		if _, ok := r["tasks_on_workers"]; !ok {
			running = count(r, "tasks_running")
		}
		d.Masters++
		d.Tasks += count(r, "tasks_waiting") + count(r, "tasks_left") + running
		d.Workers += count(r, "workers")
	}
	return d
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
