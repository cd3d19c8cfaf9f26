// Package enforce is how masters and workers carry out a worker pool's
// decision (seed 000 §4.5), without a central coordinator: each reads the
// pool's record from the catalog. A pool publishes, with its decision, the
// workers it gives each master (Assignments, under the record's
// "assignments"). A master that holds more of a pool's workers than the
// pool gives it stops giving the excess new tasks and releases each once
// it holds none (Surplus): it never stops a task. The master does so as
// things happen — a decision read, a worker joined or gone, a task done —
// through an Enforcer, a state machine on logical time that also keeps
// drained, rather than releasing again, a worker that comes straight back
// after its release (one that does not follow the pool). A worker of the
// pool that needs a master picks one at random, weighted by the slots each
// has left, its decision less the workers it has from the pool (Slots,
// Choose). A pool that states its unit (Assignment.WorkerCores) has its
// workers counted in it everywhere: a worker of k times the cores as k
// (Weigh; a master's cores_by_pool, PoolWorkers).
//
// The catalog authenticates no one: any peer may publish a record of a
// pool. A pool given the masters' password signs its decision with it
// (Sign: an HMAC-SHA256 of the pool's name, the decision's time and its
// assignments), and masters and workers that hold the password read only
// signed decisions (Decisions, Slots): of a pool's records the one decided
// last, and none the catalog heard more than MaxDecisionLag after it was
// taken (by the catalog's lastheardfrom: a replay) or before it (a pool's
// clock that is wrong). A master's Reader besides never honours a decision
// older than one it has honoured, and keeps that one instead.
//
// Without a password nothing tells a pool's record from a forgery: of the
// records of a pool, each master is given the most workers any gives it,
// so that a forgery may keep workers with a master but not take them away
// while the pool's own record is there; it may still send the pool's
// workers to a master of its own. Either way a record that says what no
// pool would (negative, fractional or more than MaxAssignedWorkers
// workers, more than MaxAssignments masters) is not read, and a worker
// goes to an assignment's master only if that master's record was heard
// from the address the assignment names.
//
// A worker's pool and worker-id are its own word: a master cannot check
// them, and counts and releases each worker as the pool it names. The
// masters' password keeps out the workers that would lie.
//
// Everything here is a pure function of what the catalog says and the
// events it is told of, without I/O or clock; the master and the worker
// drive it.
package enforce

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

// PoolType is the catalog type of a pool's record.
const PoolType = "wq_pool"

// Assignment is a pool's decision for one master.
type Assignment struct {
	Project string `json:"project"`
	// Name and Port identify the master as its own record does: Name is
	// the host name it advertises.
	Name string `json:"name"`
	Port int    `json:"port"`
	// Address is where the catalog heard the master from, where the
	// pool's workers reach it.
	Address string `json:"address"`
	Workers int    `json:"workers"`
	// WorkerCores is the cores of one of the pool's workers: the unit
	// Workers counts in, so that a worker of k times as many cores (a
	// request of k workers in one job) counts as k (Weigh). 0 if the
	// pool does not say: each worker counts as one.
	WorkerCores int `json:"worker_cores,omitempty"`
}

// Weigh is how many of a pool's workers of unit cores a worker of cores
// cores counts as: cores over unit, rounded up as a pool counts its
// requests (shape.Workers), at least one; one when either is unknown (0).
// A pool's decisions, a master's enforcement of them and a worker's
// choice of master all count a pool's workers so.
func Weigh(cores float64, unit int) int {
	if unit <= 0 || cores <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(cores/float64(unit)-1e-9)))
}

// Quota is what a pool gives a master: Workers workers of WorkerCores
// cores each (see Assignment).
type Quota struct {
	Workers     int
	WorkerCores int
}

// Addr is where the pool's workers reach the master, "host:port".
func (a Assignment) Addr() string {
	host := a.Address
	if host == "" {
		host = a.Name
	}
	return netJoin(host, a.Port)
}

func netJoin(host string, port int) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// Decision is one pool's published decision.
type Decision struct {
	Pool        string
	Assignments []Assignment
	// Decided is when the pool decided, in Unix milliseconds, as its
	// record says (0 if it does not).
	Decided int64
}

// Decisions reads the pools' decisions out of catalog records: each record
// of type PoolType with a name and assignments, one decision per pool, in
// the order of the pools' names. A record whose assignments cannot be
// read, or say what no pool would (a negative number of workers, more
// than MaxAssignedWorkers, more than MaxAssignments masters), is skipped.
//
// With password, the masters' password file's content, a record counts
// only if it is signed under it (Sign), and of the records that claim a
// pool, the one decided last is the pool's decision. Without, each master
// is given the most workers any record of the pool gives it.
func Decisions(recs []catalog.Record, password []byte) []Decision {
	var key []byte
	if len(password) > 0 {
		key = signKey(password)
	}
	byPool := map[string][]Decision{}
	for _, r := range recs {
		if r.String("type") != PoolType || r.String("name") == "" {
			continue
		}
		as, err := assignments(r["assignments"])
		if err != nil {
			continue
		}
		d := Decision{Pool: r.String("name"), Assignments: as, Decided: r.Int(FieldDecided)}
		if key != nil && !verify(key, r, d) {
			continue
		}
		byPool[d.Pool] = append(byPool[d.Pool], d)
	}
	var out []Decision
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		ds := byPool[pool]
		if key != nil {
			last := slices.MaxFunc(ds, func(a, b Decision) int { return cmp.Compare(a.Decided, b.Decided) }).Decided
			ds = slices.DeleteFunc(ds, func(d Decision) bool { return d.Decided != last })
		}
		out = append(out, resolve(ds))
	}
	return out
}

// assignments decodes a record's "assignments" field, refusing what no
// pool would say.
func assignments(v any) ([]Assignment, error) {
	switch v := v.(type) {
	case nil:
		return nil, errors.New("no assignments")
	case []any:
		// As a query decodes it: read in place, which costs a tenth
		// of encoding it again to decode it as Assignments.
		if len(v) > MaxAssignments {
			return nil, fmt.Errorf("%d assignments, more than %d", len(v), MaxAssignments)
		}
		as := make([]Assignment, len(v))
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("assignment %d is not an object", i)
			}
			a := &as[i]
			var err error
			if a.Project, err = text(m, "project"); err != nil {
				return nil, err
			}
			if a.Name, err = text(m, "name"); err != nil {
				return nil, err
			}
			if a.Address, err = text(m, "address"); err != nil {
				return nil, err
			}
			if a.Port, err = whole(m, "port", 65535); err != nil {
				return nil, err
			}
			if a.Workers, err = whole(m, "workers", MaxAssignedWorkers); err != nil {
				return nil, err
			}
			if a.WorkerCores, err = whole(m, "worker_cores", MaxWorkerCores); err != nil {
				return nil, err
			}
		}
		return as, nil
	default:
		// Anything else (assignments set in this process): read as a
		// query would decode it, with the same checks.
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		var decoded []any
		if err := json.Unmarshal(b, &decoded); err != nil {
			return nil, err
		}
		if decoded == nil { // no assignments at all: a decision about no master
			return nil, nil
		}
		return assignments(decoded)
	}
}

// text reads a string field of an assignment ("" if absent).
func text(m map[string]any, key string) (string, error) {
	switch v := m[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("assignment's %s is not a string", key)
}

// whole reads a whole number field of an assignment, between 0 and most
// (0 if absent).
func whole(m map[string]any, key string, most int) (int, error) {
	switch v := m[key].(type) {
	case nil:
		return 0, nil
	case float64:
		if v >= 0 && v <= float64(most) && v == math.Trunc(v) {
			return int(v), nil
		}
	}
	return 0, fmt.Errorf("assignment's %s is not a whole number from 0 to %d", key, most)
}

// Self identifies a master as its own catalog record does.
type Self struct {
	Name string // the host name it advertises
	Port int
}

// QuotasForMaster returns, for each pool that has decided about master
// self, the workers it gives it and the unit it counts them in: the
// decisions a master enforces (Enforcer.DecidedQuotas). A master knows
// itself by name and port only, so of several assignments that name it
// (under other projects or addresses, as a forgery merged into the pool's
// decision would), the one giving it most counts.
func QuotasForMaster(ds []Decision, self Self) map[string]Quota {
	out := map[string]Quota{}
	for _, d := range ds {
		for _, a := range d.Assignments {
			if a.Name != self.Name || a.Port != self.Port {
				continue
			}
			if q, ok := out[d.Pool]; !ok || a.Workers > q.Workers {
				out[d.Pool] = Quota{Workers: a.Workers, WorkerCores: a.WorkerCores}
			}
		}
	}
	return out
}

// Worker is one of a master's connected workers, as Surplus sees it.
type Worker struct {
	ID       int
	Pool     string // the pool that started it, or ""
	Holds    int    // tasks it runs or sends the outputs of
	Draining bool   // already given no new tasks
	Joined   time.Time
	// Cores is the cores it offers (0 if unknown): it counts as Weigh of
	// them against a decision in workers of more than one core.
	Cores float64
}

// Surplus returns the IDs of the workers a master gives no new tasks, and
// releases once they hold none: for each pool with a decision, as many of
// its workers as it has beyond the decision. It picks those that hold
// fewest tasks, then those already draining, then the newest, so that a
// worker that just joined beyond the decision is released at once and one
// that runs tasks finishes them first. Workers of pools without a
// decision, and of none, are never surplus.
//
// A worker counts as the pool's workers its cores make in the pool's unit
// (Weigh of Quota.WorkerCores), and workers are picked, in that order,
// until those left count as no more than the decision — first those that
// count as no more than what is still in excess, then any. A wide worker
// may so take the master below its decision where no narrower one can go:
// never above it.
func Surplus(quotas map[string]Quota, ws []Worker) []int {
	byPool := map[string][]Worker{}
	for _, w := range ws {
		if _, ok := quotas[w.Pool]; ok && w.Pool != "" {
			byPool[w.Pool] = append(byPool[w.Pool], w)
		}
	}
	var out []int
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		held, q := byPool[pool], quotas[pool]
		excess := -max(q.Workers, 0)
		for _, w := range held {
			excess += Weigh(w.Cores, q.WorkerCores)
		}
		if excess <= 0 {
			continue
		}
		slices.SortStableFunc(held, func(a, b Worker) int {
			switch {
			case a.Holds != b.Holds:
				return a.Holds - b.Holds
			case a.Draining != b.Draining:
				if a.Draining {
					return -1
				}
				return 1
			case !a.Joined.Equal(b.Joined):
				return b.Joined.Compare(a.Joined)
			}
			return b.ID - a.ID
		})
		// First those that fit in the excess, so that a wide worker
		// does not go where a narrow one is enough; then, in the same
		// order, as many as it still takes.
		picked := map[int]bool{}
		for _, fits := range []bool{true, false} {
			for _, w := range held {
				n := Weigh(w.Cores, q.WorkerCores)
				if excess <= 0 || picked[w.ID] || fits && n > excess {
					continue
				}
				picked[w.ID] = true
				out = append(out, w.ID)
				excess -= n
			}
		}
	}
	slices.Sort(out)
	return out
}

// Slot is a master a pool's worker may serve, and how many more of the
// pool's workers it may take.
type Slot struct {
	Addr      string // "host:port", where the catalog heard it
	SSL       bool   // its record says it wants TLS
	Remaining int
}

// Slots returns, for pool's decision among the catalog records recs
// (read as Decisions reads them under password), the masters that may
// take more of its workers: for each assignment, its workers less those
// the master's record says it has from the pool (workers_by_pool), in the
// decision's order. An assignment counts only with a master record of
// its project, name and port heard from the address it names: a record
// claiming to be that master from elsewhere is a forgery, and where the
// pool's workers go is the pool's word, not another record's. Masters
// without a record in recs are left out: they are gone. It reports false
// when recs hold no decision of pool.
func Slots(pool string, recs []catalog.Record, password []byte) ([]Slot, bool) {
	var dec *Decision
	for _, d := range Decisions(recs, password) {
		if d.Pool == pool {
			dec = &d
			break
		}
	}
	if dec == nil {
		return nil, false
	}
	// The newest record of each master: Masters sorts them so.
	masters := map[masterKey]catalog.Master{}
	for _, m := range catalog.Masters(recs) {
		// The host the pool names a master by: where the catalog
		// heard it, or its name (as Master.Addr).
		host, _, _ := net.SplitHostPort(m.Addr())
		k := masterKey{m.Project, m.Name, m.Port, host}
		if _, ok := masters[k]; !ok {
			masters[k] = m
		}
	}
	var out []Slot
	for _, a := range dec.Assignments {
		m, ok := masters[masterKey{a.Project, a.Name, a.Port, a.Address}]
		if !ok {
			continue
		}
		ssl, _ := m.Record["ssl"].(bool)
		if n := a.Workers - max(PoolWorkers(m.Record, pool, a.WorkerCores), 0); n > 0 {
			out = append(out, Slot{Addr: a.Addr(), SSL: ssl, Remaining: n})
		}
	}
	return out, true
}

// fromPool reads pool's workers from a master record's workers_by_pool
// ("pool-a:3,unmanaged:2"), 0 when it lists none, and reports whether the
// record has a workers_by_pool at all.
func fromPool(r catalog.Record, pool string) (int, bool) {
	v, ok := r["workers_by_pool"].(string)
	if !ok {
		return 0, false
	}
	for _, e := range strings.Split(v, ",") {
		name, n, _ := strings.Cut(strings.TrimSpace(e), ":")
		if name == pool {
			if k, err := strconv.Atoi(n); err == nil && k >= 0 {
				return k, true
			}
		}
	}
	return 0, true
}

// PoolWorkers reads pool's workers from a master record in workers of
// unit cores, as the pool's decision counts them (Assignment.WorkerCores):
// the cores its cores_by_pool lists for pool over unit, rounded up, and
// at least one a worker (its workers_by_pool), as the master weighs each
// (Weigh). Without a unit, or from a master whose record has no
// cores_by_pool, it is Received.
func PoolWorkers(r catalog.Record, pool string, unit int) int {
	n := Received(r, pool)
	if c := PoolCores(r, pool); unit > 0 && c > 0 {
		n = max(n, Weigh(c, unit))
	}
	return n
}

// PoolCores reads the cores of pool's workers from a master record's
// cores_by_pool ("pool-a:8,unmanaged:2"), 0 when it lists none, or -1 when
// the record has none (as CCTools' masters).
func PoolCores(r catalog.Record, pool string) float64 {
	v, ok := r["cores_by_pool"].(string)
	if !ok {
		return -1
	}
	for _, e := range strings.Split(v, ",") {
		name, n, _ := strings.Cut(strings.TrimSpace(e), ":")
		if name == pool {
			if c, err := strconv.ParseFloat(n, 64); err == nil && c > 0 && c <= MaxAssignedWorkers*float64(MaxWorkerCores) {
				return c
			}
		}
	}
	return 0
}

// Received reads pool's workers from a master record's workers_by_pool, or
// -1 when the record has none (as CCTools' masters).
func Received(r catalog.Record, pool string) int {
	n, ok := fromPool(r, pool)
	if !ok {
		return -1
	}
	return n
}

// Choose picks a slot at random, with probability proportional to its
// remaining workers: r is uniform in [0, 1). It returns -1 when no slot
// has room.
func Choose(slots []Slot, r float64) int {
	// Each weight is cut to MaxAssignedWorkers, so that no sum of them
	// overflows.
	weight := func(s Slot) int { return min(max(s.Remaining, 0), MaxAssignedWorkers) }
	total := 0
	for _, s := range slots {
		total += weight(s)
	}
	if total == 0 {
		return -1
	}
	x := int(r * float64(total))
	for i, s := range slots {
		if x < weight(s) {
			return i
		}
		x -= weight(s)
	}
	return len(slots) - 1
}
