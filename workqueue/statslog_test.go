package workqueue

import (
	"strings"
	"testing"
	"time"
)

func TestStatsLog(t *testing.T) {
	var b strings.Builder
	l, err := NewStatsLog(&b)
	if err != nil {
		t.Fatal(err)
	}
	s := Stats{WorkersConnected: 2, TasksSubmitted: 5, TasksWaiting: 1, TasksRunning: 2, TasksComplete: 2, CoresTotal: 4, CoresInUse: 1.5, BytesSent: 100}
	if err := l.Record(time.UnixMicro(1700000000123456), s); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("log: %q", b.String())
	}
	// The header as CCTools 9.9 writes it (work_queue.c, work_queue_specify_log).
	const header = "# timestamp workers_connected workers_init workers_idle workers_busy workers_able" +
		" workers_joined workers_removed workers_released workers_idled_out workers_blocked workers_fast_aborted workers_lost" +
		" tasks_waiting tasks_on_workers tasks_running tasks_with_results" +
		" tasks_submitted tasks_dispatched tasks_done tasks_failed tasks_cancelled tasks_exhausted_attempts" +
		" time_send time_receive time_send_good time_receive_good time_status_msgs time_internal time_polling time_application" +
		" time_execute time_execute_good time_execute_exhaustion" +
		" bytes_sent bytes_received bandwidth" +
		" capacity_tasks capacity_cores capacity_memory capacity_disk capacity_instantaneous capacity_weighted manager_load" +
		" total_cores total_memory total_disk" +
		" committed_cores committed_memory committed_disk" +
		" max_cores max_memory max_disk" +
		" min_cores min_memory min_disk"
	if lines[0] != header {
		t.Errorf("header:\n%s\nwant\n%s", lines[0], header)
	}
	names := strings.Fields(strings.TrimPrefix(header, "# "))
	values := strings.Fields(lines[1])
	if len(values) != len(names) {
		t.Fatalf("%d values for %d columns: %q", len(values), len(names), lines[1])
	}
	want := map[string]string{"timestamp": "1700000000123456", "workers_connected": "2", "tasks_waiting": "1",
		"tasks_running": "2", "tasks_submitted": "5", "tasks_dispatched": "4", "tasks_done": "2",
		"bytes_sent": "100", "total_cores": "4", "committed_cores": "1.5", "workers_lost": "0"}
	for i, name := range names {
		if w, ok := want[name]; ok && values[i] != w {
			t.Errorf("%s = %s, want %s", name, values[i], w)
		}
	}
}
