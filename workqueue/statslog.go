package workqueue

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// statsColumns are the columns of CCTools' Work Queue statistics log
// (work_queue_specify_log), in its order, with what this master knows of
// each; what it does not track is 0.
var statsColumns = []struct {
	name  string
	value func(s *Stats) float64
}{
	{"workers_connected", func(s *Stats) float64 { return float64(s.WorkersConnected) }},
	{"workers_init", nil},
	{"workers_idle", nil},
	{"workers_busy", nil},
	{"workers_able", nil},
	{"workers_joined", func(s *Stats) float64 { return float64(s.WorkersJoined) }},
	{"workers_removed", func(s *Stats) float64 { return float64(s.WorkersRemoved) }},
	{"workers_released", nil},
	{"workers_idled_out", nil},
	{"workers_blocked", nil},
	{"workers_fast_aborted", nil},
	{"workers_lost", func(s *Stats) float64 { return float64(s.WorkersLost) }},
	{"tasks_waiting", func(s *Stats) float64 { return float64(s.TasksWaiting) }},
	{"tasks_on_workers", func(s *Stats) float64 { return float64(s.TasksRunning) }},
	{"tasks_running", func(s *Stats) float64 { return float64(s.TasksRunning) }},
	{"tasks_with_results", nil},
	{"tasks_submitted", func(s *Stats) float64 { return float64(s.TasksSubmitted) }},
	{"tasks_dispatched", func(s *Stats) float64 { return float64(s.TasksSubmitted - s.TasksWaiting) }},
	{"tasks_done", func(s *Stats) float64 { return float64(s.TasksComplete) }},
	{"tasks_failed", func(s *Stats) float64 { return float64(s.TasksFailed) }},
	{"tasks_cancelled", func(s *Stats) float64 { return float64(s.TasksCancelled) }},
	{"tasks_exhausted_attempts", nil},
	{"time_send", nil},
	{"time_receive", nil},
	{"time_send_good", nil},
	{"time_receive_good", nil},
	{"time_status_msgs", nil},
	{"time_internal", func(s *Stats) float64 { return float64(s.ThinkTime.Microseconds()) }},
	{"time_polling", nil},
	{"time_application", nil},
	{"time_execute", func(s *Stats) float64 { return float64(s.ExecTime.Microseconds()) }},
	{"time_execute_good", nil},
	{"time_execute_exhaustion", nil},
	{"bytes_sent", func(s *Stats) float64 { return float64(s.BytesSent) }},
	{"bytes_received", func(s *Stats) float64 { return float64(s.BytesReceived) }},
	{"bandwidth", nil},
	{"capacity_tasks", func(s *Stats) float64 { return float64(s.CapacityTasks()) }},
	{"capacity_cores", nil},
	{"capacity_memory", nil},
	{"capacity_disk", nil},
	{"capacity_instantaneous", nil},
	{"capacity_weighted", func(s *Stats) float64 { return float64(int64(s.CapacityWeighted)) }},
	{"manager_load", nil},
	{"total_cores", func(s *Stats) float64 { return s.CoresTotal }},
	{"total_memory", func(s *Stats) float64 { return float64(s.MemoryTotal) }},
	{"total_disk", func(s *Stats) float64 { return float64(s.DiskTotal) }},
	{"committed_cores", func(s *Stats) float64 { return s.CoresInUse }},
	{"committed_memory", func(s *Stats) float64 { return float64(s.MemoryInUse) }},
	{"committed_disk", func(s *Stats) float64 { return float64(s.DiskInUse) }},
	{"max_cores", nil},
	{"max_memory", nil},
	{"max_disk", nil},
	{"min_cores", nil},
	{"min_memory", nil},
	{"min_disk", nil},
}

// A StatsLog writes a master's statistics in the format of CCTools' Work
// Queue log (makeflow's -L with -T wq, work_queue_specify_log): a header
// line naming the columns, then one line per Record, the time in
// microseconds first. Columns this master does not track hold 0.
type StatsLog struct {
	w   io.Writer
	buf []byte
}

// NewStatsLog writes the header to w and returns the log.
func NewStatsLog(w io.Writer) (*StatsLog, error) {
	names := make([]string, 0, len(statsColumns)+1)
	names = append(names, "timestamp")
	for _, c := range statsColumns {
		names = append(names, c.name)
	}
	if _, err := fmt.Fprintf(w, "# %s\n", strings.Join(names, " ")); err != nil {
		return nil, err
	}
	return &StatsLog{w: w}, nil
}

// Record writes one line: s as it was at now.
func (l *StatsLog) Record(now time.Time, s Stats) error {
	b := strconv.AppendInt(l.buf[:0], now.UnixMicro(), 10)
	for _, c := range statsColumns {
		b = append(b, ' ')
		v := 0.0
		if c.value != nil {
			v = c.value(&s)
		}
		b = strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	b = append(b, '\n')
	l.buf = b
	_, err := l.w.Write(b)
	return err
}
