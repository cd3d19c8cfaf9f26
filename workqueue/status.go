package workqueue

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// queueRecord is the master's record in CCTools' key names, as sent to the
// catalog and answered to "queue_status".
func (l *loop) queueRecord(now time.Time) catalog.Record {
	st := l.stats()
	wd, _ := os.Getwd()
	host, _ := os.Hostname()
	return catalog.Record{
		"type":                         "wq_master",
		"project":                      l.m.cfg.Project,
		"name":                         host,
		"port":                         st.Port,
		"owner":                        owner(),
		"version":                      "rightsize",
		"protocol":                     wire.Protocol,
		"starttime":                    st.Started.Unix(),
		"working_dir":                  wd,
		"priority":                     l.m.cfg.Priority,
		"lifetime":                     max(180, 3*int(l.m.cfg.AdvertiseInterval.Seconds())),
		"manager_preferred_connection": "by_ip",
		"ssl":                          l.m.cfg.TLS != nil,
		"tasks_waiting":                st.TasksWaiting,
		"tasks_running":                st.TasksRunning,
		"tasks_on_workers":             st.TasksRunning,
		"tasks_complete":               st.TasksComplete,
		"tasks_done":                   st.TasksComplete,
		"tasks_failed":                 st.TasksFailed,
		"tasks_cancelled":              st.TasksCancelled,
		"tasks_submitted":              st.TasksSubmitted,
		"tasks_left":                   0,
		"total_tasks_dispatched":       st.TasksSubmitted - st.TasksWaiting,
		"workers":                      st.WorkersConnected,
		"workers_connected":            st.WorkersConnected,
		"workers_by_pool":              l.byPool(func(*workerConn) float64 { return 1 }),
		"cores_by_pool":                l.byPool(l.cores),
		"workers_joined":               st.WorkersJoined,
		"workers_removed":              st.WorkersRemoved,
		"workers_released":             st.WorkersReleased,
		"workers_lost":                 st.WorkersLost,
		"workers_fast_aborted":         st.FastAborts,
		"cores_total":                  st.CoresTotal,
		"cores_inuse":                  st.CoresInUse,
		"memory_total":                 st.MemoryTotal,
		"memory_inuse":                 st.MemoryInUse,
		"disk_total":                   st.DiskTotal,
		"disk_inuse":                   st.DiskInUse,
		"gpus_total":                   st.GPUsTotal,
		"gpus_inuse":                   st.GPUsInUse,
		"capacity":                     st.Capacity,
		"capacity_tasks":               st.CapacityTasks(),
		"capacity_weighted":            st.CapacityWeighted,
		"bytes_sent":                   st.BytesSent,
		"bytes_received":               st.BytesReceived,
		"time_workers_execute_good":    st.ExecTime.Microseconds(),
		"time_send_good":               st.TransferTime.Microseconds(),
		"time_application":             st.ThinkTime.Microseconds(),
		"time_when_started":            st.Started.UnixMicro(),
		"current_time":                 now.UnixMicro(),
	}
}

// byPool sums each connected worker's size (1 for workers_by_pool, its
// cores for cores_by_pool) by the pool that started it, as seed 000
// §4.4.1 advertises workers: "pool-a:3,pool-b:1,unmanaged:2" (pools by
// name, unmanaged last, absent when none). workers_by_pool counts
// connections, as CCTools does; a pool whose workers differ in cores (a
// request of k workers is one worker of k times the cores) reads its
// workers from cores_by_pool, in its own unit (enforce.PoolWorkers).
func (l *loop) byPool(size func(*workerConn) float64) string {
	n := map[string]float64{}
	unmanaged := 0.0
	for _, w := range l.workers {
		if p := w.pool.Load(); p != nil {
			n[*p] += size(w)
		} else {
			unmanaged += size(w)
		}
	}
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(n)) {
		fmt.Fprintf(&b, "%s:%s,", p, strconv.FormatFloat(n[p], 'f', -1, 64))
	}
	if unmanaged > 0 {
		fmt.Fprintf(&b, "unmanaged:%s,", strconv.FormatFloat(unmanaged, 'f', -1, 64))
	}
	return strings.TrimSuffix(b.String(), ",")
}

// cores is the cores worker w offers, as the scheduler knows them.
func (l *loop) cores(w *workerConn) float64 {
	_, total, _, _ := l.s.WorkerLoad(w.id)
	return total.Cores
}

// status answers a status query with a JSON array (and a newline).
func (l *loop) status(kind string, now time.Time) []byte {
	var out []catalog.Record
	switch kind {
	case "queue", "catalog":
		out = []catalog.Record{l.queueRecord(now)}
		if kind == "catalog" {
			b, _ := json.Marshal(out[0])
			return b
		}
	case "task":
		ids := make([]int, 0, len(l.tasks))
		for id := range l.tasks {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			e := l.tasks[id]
			r := catalog.Record{
				"taskid": e.id, "command": e.task.Command, "category": category(e.task), "tag": e.task.Tag,
				"state": []string{"done", "waiting", "running", "waiting_retrieval"}[l.s.TaskState(e.sched.ID)],
				"cores": e.task.Resources.Cores, "memory": e.task.Resources.MemoryMB,
				"disk": e.task.Resources.DiskMB, "gpus": e.task.Resources.GPUs, "priority": "0",
				"time_when_submitted": e.submitted.UnixMicro(), "current_time": now.UnixMicro(),
			}
			if n := len(e.attempts); n > 0 {
				a := e.attempts[n-1]
				r["host"] = a.worker.hello.Host
				r["address_port"] = a.worker.addr
				r["time_when_commit_start"] = a.dispatched.UnixMicro()
			}
			out = append(out, r)
		}
	case "worker", "resources", "wable":
		for _, id := range slices.Sorted(maps.Keys(l.workers)) {
			w := l.workers[id]
			used, total, n, _ := l.s.WorkerLoad(w.id)
			out = append(out, catalog.Record{
				"hostname": w.hello.Host, "address_port": w.addr, "os": w.hello.OS, "arch": w.hello.Arch,
				"version": w.hello.Version, "total_tasks_running": n, "from_factory": w.poolName(), "total_tasks_complete": w.completed.Load(),
				"cores_total": total.Cores, "cores_inuse": used.Cores,
				"memory_total": total.MemoryMB, "memory_inuse": used.MemoryMB,
				"disk_total": total.DiskMB, "disk_inuse": used.DiskMB,
				"gpus_total": total.GPUs, "gpus_inuse": used.GPUs,
				"start_time": w.joined.UnixMicro(), "current_time": now.UnixMicro(),
				"total_bytes_transferred": w.bytesSent.Load() + w.bytesReceived.Load(),
			})
		}
	}
	if out == nil {
		out = []catalog.Record{}
	}
	b, _ := json.Marshal(out)
	return append(b, '\n')
}

func category(t *Task) string {
	if t.Category == "" {
		return "default"
	}
	return t.Category
}

func decodeRecord(b []byte) catalog.Record {
	var r catalog.Record
	json.Unmarshal(b, &r)
	return r
}

// poolName is the pool that started the worker, or "".
func (w *workerConn) poolName() string {
	if p := w.pool.Load(); p != nil {
		return *p
	}
	return ""
}

// workerKey is the worker's worker-id, which it gives on every
// connection, or "" if it gave none.
func (w *workerConn) workerKey() string {
	if k := w.key.Load(); k != nil {
		return *k
	}
	return ""
}
