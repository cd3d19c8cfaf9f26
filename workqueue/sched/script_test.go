package sched

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"
)

// The tests in this file drive the scheduler with scripts of events at
// logical times and compare the actions of each event with the expected
// ones, written as short strings (see show).

// show writes actions as "run T@W", "copy T@W", "abort T@W REASON" (with
// "#N" and "final" for fast aborts), "fetch T@W", "discard T@W",
// "complete T@W", "check W", "drop W", "warn W" and "fail T".
func show(acts []Action) string {
	var out []string
	for _, a := range acts {
		switch a := a.(type) {
		case Dispatch:
			verb := "run"
			if a.Copy {
				verb = "copy"
			}
			out = append(out, fmt.Sprintf("%s %d@%d", verb, a.Task, a.Worker))
		case Abort:
			s := fmt.Sprintf("abort %d@%d %s", a.Task, a.Worker, strings.Fields(a.Reason.String())[0])
			if a.Reason == FastAborted {
				s += fmt.Sprintf(" #%d", a.Count)
				if a.Final {
					s += " final"
				}
			}
			out = append(out, s)
		case Fetch:
			out = append(out, fmt.Sprintf("fetch %d@%d", a.Task, a.Worker))
		case Discard:
			out = append(out, fmt.Sprintf("discard %d@%d", a.Task, a.Worker))
		case Complete:
			out = append(out, fmt.Sprintf("complete %d@%d", a.Task, a.Worker))
		case Check:
			out = append(out, fmt.Sprintf("check %d", a.Worker))
		case DropWorker:
			out = append(out, fmt.Sprintf("drop %d", a.Worker))
		case Warning:
			out = append(out, fmt.Sprintf("warn %d", a.Worker))
		case Fail:
			out = append(out, fmt.Sprintf("fail %d", a.Task))
		}
	}
	return strings.Join(out, ", ")
}

// step is one event of a script: at a time in seconds, what happens, and
// the actions it must return.
//
//	join W HOST CORES  a worker joins
//	leave W            it leaves
//	submit T [CAT]     a task is submitted
//	report T W         its attempt on W reports success; "fails T W": failure
//	fetched T W        the outputs it reported are in
//	done T W           report then fetched, showing neither fetch nor
//	                   complete; "failed T W": failure
//	back T W           W gives its attempt back
//	cancel T           it is cancelled
//	heard W            W is heard from
//	tick               time passes
//	warm W N [CAT]     N one-second tasks run and succeed on W (setup: the
//	                   actions are not checked)
type step struct {
	at   float64
	do   string
	want string
}

func runScript(t *testing.T, cfg Config, steps []step) *Scheduler {
	t.Helper()
	s := New(cfg)
	for i, st := range steps {
		f := strings.Fields(st.do)
		arg := func(k int) int {
			var n int
			fmt.Sscan(f[k], &n)
			return n
		}
		opt := func(k int) string {
			if len(f) > k {
				return f[k]
			}
			return ""
		}
		now := at(st.at)
		var acts []Action
		switch f[0] {
		case "join":
			acts = s.WorkerJoined(WorkerID(arg(1)), f[2], Resources{Cores: float64(arg(3))}, now)
		case "leave":
			acts = s.WorkerLeft(WorkerID(arg(1)), now)
		case "submit":
			acts = s.Submit(Task{ID: TaskID(arg(1)), Category: opt(2)}, now)
		case "report", "fails":
			acts = s.TaskDone(TaskID(arg(1)), WorkerID(arg(2)), f[0] == "report", now)
		case "fetched":
			acts = s.Fetched(TaskID(arg(1)), WorkerID(arg(2)), now)
		case "done", "failed":
			acts = s.TaskDone(TaskID(arg(1)), WorkerID(arg(2)), f[0] == "done", now)
			if _, ok := acts[0].(Fetch); ok {
				acts = append(acts[1:], s.Fetched(TaskID(arg(1)), WorkerID(arg(2)), now)[1:]...)
			}
		case "back":
			acts = s.GivenBack(TaskID(arg(1)), WorkerID(arg(2)), now)
		case "heard":
			s.Heard(WorkerID(arg(1)), now)
		case "cancel":
			acts = s.Cancel(TaskID(arg(1)), now)
		case "tick":
			acts = s.Tick(now)
		case "warm":
			warm(s, WorkerID(arg(1)), arg(2), opt(3), now)
			continue
		default:
			t.Fatalf("step %d: unknown event %q", i, st.do)
		}
		if got := show(acts); got != st.want {
			t.Fatalf("step %d at %gs, %s:\n got  %s\n want %s", i, st.at, st.do, got, st.want)
		}
	}
	return s
}

// warm runs n one-second tasks of category cat on worker w from now, one
// after the other, as if they had been dispatched there.
func warm(s *Scheduler, w WorkerID, n int, cat string, now time.Time) {
	for i := 0; i < n; i++ {
		id := TaskID(10000 + len(s.stats)*1000 + i)
		if st := s.stats[cat]; st != nil {
			id += TaskID(st.N())
		}
		tk := &task{Task: Task{ID: id, Category: cat}}
		s.tasks[id] = tk
		wk := s.workers[w]
		s.start(tk, wk, need(tk, wk), now, false)
		now = now.Add(time.Second)
		s.TaskDone(id, w, true, now)
		s.Fetched(id, w, now)
	}
}

func TestScripts(t *testing.T) {
	noCopies := Speculation{Multiplier: -1}
	cases := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"slow start: a new worker holds SlowStart tasks, one more for each result", Config{SlowStart: 2}, []step{
			{0, "join 1 liar 100", ""},
			{0, "submit 1", "run 1@1"},
			{0, "submit 2", "run 2@1"},
			{0, "submit 3", ""},
			{0, "submit 4", ""},
			{0, "submit 5", ""},
			{1, "done 1 1", "run 3@1, run 4@1"},
			{2, "failed 2 1", "run 5@1"}, // a failure is a result too
		}},
		{"a negative SlowStart leaves only the resources", Config{SlowStart: -1}, []step{
			{0, "join 1 h 3", ""},
			{0, "submit 1", "run 1@1"},
			{0, "submit 2", "run 2@1"},
			{0, "submit 3", "run 3@1"},
			{0, "submit 4", ""},
		}},
		{"an overdue task is copied to an idle proven worker; the first result wins", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{1.9, "tick", ""}, // not yet twice the mean
			{2.1, "tick", "copy 1@2"},
			{2.5, "tick", ""}, // one copy per task
			{2.6, "done 1 2", "abort 1@1 superseded"},
			{2.7, "done 1 1", "discard 1@1"}, // the loser's late report
		}},
		{"the original may win too", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{2.1, "tick", "copy 1@2"},
			{2.2, "done 1 1", "abort 1@2 superseded"},
		}},
		{"no copy to a worker that has not returned a result, nor before MinSamples", Config{}, []step{
			{0, "join 1 a 1", ""},
			{-10, "warm 1 2", ""},
			{0, "join 2 b 1", ""},
			{0, "submit 1", "run 1@1"},
			{5, "tick", ""},
			{-5, "warm 1 1 other", ""}, // a third sample, of another category
			{6, "tick", ""},
		}},
		{"no copy with Speculation off", Config{Speculation: noCopies}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{100, "tick", ""},
		}},
		{"a copy gives its place to a waiting task", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{2.1, "tick", "copy 1@2"},
			{2.2, "submit 2", "abort 1@2 yielded, run 2@2"},
			{3, "report 1 1", "fetch 1@1"},
			{3, "done 2 2", ""},
			{3.1, "fetched 1 1", "complete 1@1"},
		}},
		{"a copy whose original's worker left is the task's attempt, and yields no more", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{2.1, "tick", "copy 1@2"},
			{2.5, "leave 1", ""},
			{2.6, "submit 2", ""},
			{4, "done 1 2", "run 2@2"},
		}},
		{"fast abort of an original whose copy runs: the copy carries on", Config{FastAbort: FastAbort{Multiplier: 3, MinSamples: 3}}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{2.1, "tick", "copy 1@2"},
			{3.1, "tick", "abort 1@1 fast #1"},
			{3.5, "done 1 2", ""},
		}},
		{"a late result of a fast-aborted attempt is taken", Config{FastAbort: FastAbort{Multiplier: 3, MinSamples: 3}, Speculation: noCopies}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{1, "submit 2", "run 2@2"},
			{3.1, "tick", "abort 1@1 fast #1"}, // task 1 waits for worker 2
			{3.2, "done 1 1", ""},              // ... and is done after all
			{3.5, "done 2 2", ""},
		}},
		{"the only worker that trips fast abort twice is kept, with a warning", Config{FastAbort: FastAbort{Multiplier: 2, MinSamples: 3}, Speculation: noCopies}, []step{
			{0, "join 1 h 2", ""},
			{-10, "warm 1 3", ""},
			{0, "submit 1", "run 1@1"},
			{1, "submit 2", "run 2@1"},
			{2.5, "tick", "abort 1@1 fast #1, run 1@1"},
			{3.5, "tick", "abort 2@1 fast #1, warn 1, run 2@1"},
			{4, "done 1 1", ""},
			{4.5, "done 2 1", ""},
		}},
		{"a worker that trips twice is dropped while another can run its tasks; its host comes back when none can", Config{FastAbort: FastAbort{Multiplier: 2, MinSamples: 3, BlockFor: time.Minute}, Speculation: noCopies}, []step{
			{0, "join 1 bad 2", ""},
			{-10, "warm 1 3", ""},
			{0, "submit 1", "run 1@1"},
			{0, "submit 2", "run 2@1"},
			{0.5, "join 2 good 1", ""},
			{2.5, "tick", "abort 1@1 fast #1, abort 2@1 fast #1, drop 1, run 1@2"},
			{10, "join 3 bad 2", "drop 3"},
			{11, "leave 2", ""},
			{12, "join 4 bad 2", "warn 4, run 1@4, run 2@4"},
			{13, "join 5 bad 1", ""}, // the block is lifted
		}},
		{"a blocked host's worker is refused while another is connected, let in after BlockFor", Config{FastAbort: FastAbort{Multiplier: 2, MinSamples: 3, BlockFor: time.Minute}, Speculation: noCopies}, []step{
			{0, "join 1 bad 2", ""},
			{-10, "warm 1 3", ""},
			{0, "submit 1", "run 1@1"},
			{0, "submit 2", "run 2@1"},
			{0.5, "join 2 good 1", ""},
			{2.5, "tick", "abort 1@1 fast #1, abort 2@1 fast #1, drop 1, run 1@2"},
			{63, "join 3 bad 2", "run 2@3"},
		}},
		{"a report while another's outputs come is discarded; the outputs complete the task", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{2.1, "tick", "copy 1@2"},
			{2.2, "report 1 2", "fetch 1@2, abort 1@1 superseded"},
			{2.3, "report 1 1", "discard 1@1"},
			{2.4, "fetched 1 1", ""}, // not the outputs taken
			{2.5, "fetched 1 2", "complete 1@2"},
			{2.6, "fetched 1 2", ""},
		}},
		{"a worker lost while its outputs come: the task runs again elsewhere", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{0, "submit 1", "run 1@1"},
			{1, "report 1 1", "fetch 1@1"},
			{1.5, "leave 1", "run 1@2"},
			{1.6, "fetched 1 1", ""},
			{3, "done 1 2", ""},
		}},
		{"a task lost while fetched counts towards MaxLost", Config{MaxLost: 1}, []step{
			{0, "join 1 a 1", ""},
			{0, "submit 1", "run 1@1"},
			{1, "report 1 1", "fetch 1@1"},
			{1.5, "leave 1", ""},
			{2, "join 2 b 1", "run 1@2"},
			{3, "leave 2", "fail 1"},
		}},
		{"a task given back starts again, its copy aborted; the sixth time it fails", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{2.1, "tick", "copy 1@2"},
			{2.2, "back 1 2", "abort 1@1 restarted, run 1@1"},
			{2.3, "back 1 2", ""}, // not running there
			{2.4, "back 1 1", "run 1@1"},
			{2.5, "back 1 1", "run 1@1"},
			{2.6, "back 1 1", "run 1@1"},
			{2.7, "back 1 1", "run 1@1"},
			{2.8, "back 1 1", "fail 1"},
		}},
		{"keepalive: a silent worker is checked, then dropped with its tasks requeued", Config{Keepalive: Keepalive{Interval: 10 * time.Second, Timeout: 5 * time.Second}}, []step{
			{0, "join 1 a 2", ""},
			{0, "join 2 b 1", ""},
			{0, "submit 1", "run 1@1"},
			{0, "submit 2", "run 2@2"},
			{9, "heard 2", ""},
			{10.5, "tick", "check 1"},
			{12, "tick", ""},    // asked a moment ago
			{14, "heard 1", ""}, // it answered
			{20, "tick", "check 2"},
			{23.9, "tick", ""},
			{24.1, "tick", "check 1, drop 2, run 2@1"}, // 2 silent for 15.1 s
		}},
		{"keepalive off", Config{Keepalive: Keepalive{Interval: -1}}, []step{
			{0, "join 1 a 1", ""},
			{1000, "tick", ""},
		}},
		{"cancel aborts every attempt", Config{}, []step{
			{0, "join 1 a 1", ""},
			{0, "join 2 b 1", ""},
			{-10, "warm 2 3", ""},
			{0, "submit 1", "run 1@1"},
			{2.1, "tick", "copy 1@2"},
			{2.2, "cancel 1", "abort 1@1 cancelled, abort 1@2 cancelled"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runScript(t, tc.cfg, tc.steps) })
	}
}

// sim runs tasks on simulated workers in logical time: each attempt of a
// task on a worker takes dur(task, worker) seconds (+Inf: it never ends),
// and the scheduler ticks every tick seconds. It records what each worker
// held at most and how each attempt ended.
type sim struct {
	t      *testing.T
	s      *Scheduler
	now    float64
	tick   float64
	dur    func(TaskID, WorkerID) float64
	ends   map[attemptKey]float64
	done   map[TaskID]float64   // when each task finished
	held   map[WorkerID]int     // the most tasks each worker held
	heldAt map[WorkerID]float64 // when it first held that many
	aborts map[AbortReason]int
	drops  int
	warns  int
}

type attemptKey struct {
	t TaskID
	w WorkerID
}

func newSim(t *testing.T, cfg Config, tick float64, dur func(TaskID, WorkerID) float64) *sim {
	return &sim{t: t, s: New(cfg), tick: tick, dur: dur, ends: map[attemptKey]float64{},
		done: map[TaskID]float64{}, held: map[WorkerID]int{}, heldAt: map[WorkerID]float64{}, aborts: map[AbortReason]int{}}
}

func (m *sim) apply(acts []Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case Dispatch:
			m.ends[attemptKey{a.Task, a.Worker}] = m.now + m.dur(a.Task, a.Worker)
		case Abort:
			m.aborts[a.Reason]++
			delete(m.ends, attemptKey{a.Task, a.Worker})
		case DropWorker:
			m.drops++
			for k := range m.ends {
				if k.w == a.Worker {
					delete(m.ends, k)
				}
			}
		case Warning:
			m.warns++
		case Complete:
			m.done[a.Task] = m.now
		case Fail:
			m.t.Fatalf("task %d failed: %s", a.Task, a.Reason)
		}
	}
	for id, w := range m.s.workers {
		if len(w.tasks) > m.held[id] {
			m.held[id], m.heldAt[id] = len(w.tasks), m.now
		}
	}
}

func (m *sim) join(w WorkerID, host string, r Resources) {
	m.apply(m.s.WorkerJoined(w, host, r, at(m.now)))
}

func (m *sim) submit(first, n int) {
	for id := first; id < first+n; id++ {
		m.apply(m.s.Submit(Task{ID: TaskID(id)}, at(m.now)))
	}
}

// run goes on until every task submitted has finished or until the time
// limit, and returns the time it stopped.
func (m *sim) run(limit float64) float64 {
	nextTick := math.Ceil(m.now/m.tick+1e-9) * m.tick
	for m.now < limit && len(m.s.tasks) > 0 {
		var keys []attemptKey
		for k := range m.ends {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := keys[i], keys[j]
			return m.ends[a] < m.ends[b] || m.ends[a] == m.ends[b] && (a.t < b.t || a.t == b.t && a.w < b.w)
		})
		if len(keys) > 0 && m.ends[keys[0]] <= nextTick {
			k := keys[0]
			m.now = m.ends[k]
			delete(m.ends, k)
			acts := m.s.TaskDone(k.t, k.w, true, at(m.now))
			if _, ok := acts[0].(Fetch); ok {
				acts = append(acts, m.s.Fetched(k.t, k.w, at(m.now))...)
			}
			m.apply(acts)
			continue
		}
		m.now = nextTick
		nextTick += m.tick
		for id := range m.s.workers {
			m.s.Heard(id, at(m.now)) // they answer
		}
		m.apply(m.s.Tick(at(m.now)))
	}
	return m.now
}

// TestLyingWorker: a worker announcing 1000 cores that never finishes
// anything holds SlowStart tasks, not all of them; an honest two-core
// worker runs the rest, then copies of what the liar holds, and the run
// ends as if the liar were not there, give or take a tick.
func TestLyingWorker(t *testing.T) {
	const liar, honest = 1, 2
	m := newSim(t, Config{}, 0.2, func(_ TaskID, w WorkerID) float64 {
		if w == liar {
			return math.Inf(1)
		}
		return 1
	})
	m.join(liar, "10.0.0.66", Resources{Cores: 1000, MemoryMB: 1 << 20, DiskMB: 1 << 20})
	m.submit(1, 20)
	m.now = 0.1
	m.join(honest, "10.0.0.2", Resources{Cores: 2, MemoryMB: 4000, DiskMB: 8000})
	end := m.run(1000)
	if len(m.done) != 20 {
		t.Fatalf("%d of 20 tasks finished by %gs", len(m.done), end)
	}
	if m.held[liar] != 4 {
		t.Errorf("the liar held up to %d tasks, want SlowStart = 4", m.held[liar])
	}
	if m.aborts[Superseded] != 4 {
		t.Errorf("%d attempts superseded, want the liar's 4", m.aborts[Superseded])
	}
	// Alone, the honest worker would need 10 s for 20 one-second tasks.
	if end > 10.1+2*m.tick+1 {
		t.Errorf("the run ended at %gs, want about 10 s", end)
	}
}

// TestSlowStartRamp: an honest 64-core worker alone starts with SlowStart
// tasks and is full after log₂(64/4) = 4 rounds; the run loses less than
// those rounds' idle cores.
func TestSlowStartRamp(t *testing.T) {
	m := newSim(t, Config{}, 0.2, func(TaskID, WorkerID) float64 { return 1 })
	m.join(1, "big", Resources{Cores: 64})
	m.submit(1, 640)
	if m.held[1] != 4 {
		t.Fatalf("a new worker got %d tasks at once, want 4", m.held[1])
	}
	end := m.run(1000)
	if m.held[1] != 64 || m.heldAt[1] > 4 {
		t.Errorf("the worker held at most %d tasks, first at %gs; want 64 after 4 rounds", m.held[1], m.heldAt[1])
	}
	if len(m.done) != 640 || end > 10+4 {
		t.Errorf("%d tasks done by %gs; want 640 by 10 s + 4 rounds", len(m.done), end)
	}
}

// TestLoadedMachine: after the first tasks, the machine gets loaded and
// every task takes five times as long, on both two-core workers (one
// host). Fast
// abort then aborts every task; it must not keep out both workers: the last
// one that can run the tasks stays, with a warning, and every task ends.
func TestLoadedMachine(t *testing.T) {
	m := newSim(t, Config{FastAbort: FastAbort{Multiplier: 3, MinSamples: 3, BlockFor: 5 * time.Minute}, Speculation: Speculation{Multiplier: -1}},
		0.05, func(TaskID, WorkerID) float64 { return 5 })
	m.join(1, "127.0.0.1", Resources{Cores: 2})
	m.join(2, "127.0.0.1", Resources{Cores: 2})
	warm(m.s, 1, 3, "", at(-10))
	m.submit(1, 8)
	end := m.run(1000)
	if len(m.done) != 8 {
		t.Fatalf("%d of 8 tasks finished by %gs, with %d workers", len(m.done), end, len(m.s.workers))
	}
	if m.drops != 1 || m.warns == 0 || len(m.s.workers) != 1 {
		t.Errorf("%d workers dropped, %d warnings, %d left; want 1, some, 1", m.drops, m.warns, len(m.s.workers))
	}
}

// TestStragglerDecision is the decision TestStraggler (package distmaster)
// checks end to end, on logical time: eight half-second tasks on two
// one-core workers, one of which hangs on its first attempt. With
// Multiplier 3 and MinSamples 3, the hanging attempt — and nothing else —
// is aborted, once, whatever the order in which tasks are dispatched; its
// second attempt runs on the other worker.
func TestStragglerDecision(t *testing.T) {
	for hung := TaskID(1); hung <= 8; hung++ {
		t.Run(fmt.Sprint("task ", hung), func(t *testing.T) {
			attempts := 0
			m := newSim(t, Config{FastAbort: FastAbort{Multiplier: 3, MinSamples: 3}, Speculation: Speculation{Multiplier: -1}},
				0.05, func(id TaskID, _ WorkerID) float64 {
					if id == hung {
						if attempts++; attempts == 1 {
							return math.Inf(1)
						}
					}
					return 0.5
				})
			m.join(1, "127.0.0.1", Resources{Cores: 1})
			m.join(2, "127.0.0.1", Resources{Cores: 1})
			m.submit(1, 8)
			m.run(1000)
			if len(m.done) != 8 || m.aborts[FastAborted] != 1 || attempts != 2 || m.drops != 0 {
				t.Errorf("%d tasks done, %d fast aborts, %d attempts of the hanging task, %d drops; want 8, 1, 2, 0",
					len(m.done), m.aborts[FastAborted], attempts, m.drops)
			}
		})
	}
}
