package sched

import (
	"math/rand"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func dispatches(acts []Action) map[TaskID]WorkerID {
	m := map[TaskID]WorkerID{}
	for _, a := range acts {
		if d, ok := a.(Dispatch); ok {
			m[d.Task] = d.Worker
		}
	}
	return m
}

func TestDefaultResourcesAreOneCoreNotAWholeWorker(t *testing.T) {
	s := New(Config{})
	s.WorkerJoined(1, "h1", Resources{Cores: 2, MemoryMB: 1000, DiskMB: 4000}, t0)
	a1 := s.Submit(Task{ID: 1}, t0)
	a2 := s.Submit(Task{ID: 2}, t0)
	a3 := s.Submit(Task{ID: 3}, t0)
	want := Dispatch{Task: 1, Worker: 1, Alloc: Resources{Cores: 1, MemoryMB: 500, DiskMB: 2000}}
	if len(a1) != 1 || a1[0] != want {
		t.Fatalf("first task: %v, want %v", a1, want)
	}
	if len(a2) != 1 || len(a3) != 0 {
		t.Fatalf("a 2-core worker should run two default tasks and queue the third: %v %v", a2, a3)
	}
	if c := s.Counts(); c.Waiting != 1 || c.Running != 2 {
		t.Errorf("counts %+v", c)
	}
	if acts := s.TaskDone(1, 1, true, at(1)); dispatches(acts)[3] != 1 {
		t.Errorf("freed core should go to task 3: %v", acts)
	}
}

func TestMatching(t *testing.T) {
	big := Resources{Cores: 8, MemoryMB: 8000, DiskMB: 8000}
	small := Resources{Cores: 1, MemoryMB: 1000, DiskMB: 1000}
	cases := []struct {
		name    string
		workers map[WorkerID]Resources
		setup   func(s *Scheduler)
		task    Task
		want    WorkerID // 0: stays waiting
	}{
		{"fits only the big worker", map[WorkerID]Resources{1: small, 2: big}, nil,
			Task{ID: 10, Need: Resources{Cores: 4}}, 2},
		{"fits nobody", map[WorkerID]Resources{1: small}, nil,
			Task{ID: 10, Need: Resources{Cores: 1, MemoryMB: 2000}}, 0},
		{"cached input wins", map[WorkerID]Resources{1: big, 2: big}, func(s *Scheduler) {
			s.workers[2].cached["file-0-x"] = true
		}, Task{ID: 10, Inputs: []Input{{"file-0-x", 100}}}, 2},
		{"more cached bytes win", map[WorkerID]Resources{1: big, 2: big}, func(s *Scheduler) {
			s.workers[1].cached["small"] = true
			s.workers[2].cached["large"] = true
		}, Task{ID: 10, Inputs: []Input{{"small", 10}, {"large", 1000}}}, 2},
		{"faster history wins", map[WorkerID]Resources{1: big, 2: big}, func(s *Scheduler) {
			s.workers[1].speed, s.workers[1].samples = 3, 1
			s.workers[2].speed, s.workers[2].samples = 0.5, 1
		}, Task{ID: 10}, 2},
		{"less loaded wins a tie", map[WorkerID]Resources{1: big, 2: big}, func(s *Scheduler) {
			s.Submit(Task{ID: 1}, t0)
		}, Task{ID: 10}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{})
			for id := WorkerID(1); id <= 2; id++ {
				if r, ok := tc.workers[id]; ok {
					s.WorkerJoined(id, "h", r, t0)
				}
			}
			if tc.setup != nil {
				tc.setup(s)
			}
			got := dispatches(s.Submit(tc.task, t0))[tc.task.ID]
			if got != tc.want {
				t.Errorf("task went to worker %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWorkerLostRequeuesFirst(t *testing.T) {
	s := New(Config{})
	s.WorkerJoined(1, "h1", Resources{Cores: 1}, t0)
	s.Submit(Task{ID: 1}, t0)
	s.Submit(Task{ID: 2}, t0)
	acts := s.WorkerLeft(1, t0)
	if len(acts) != 0 {
		t.Fatalf("no worker left, yet %v", acts)
	}
	got := dispatches(s.WorkerJoined(2, "h2", Resources{Cores: 1}, t0))
	if !reflect.DeepEqual(got, map[TaskID]WorkerID{1: 2}) {
		t.Errorf("the lost task should run first on the new worker: %v", got)
	}
}

func TestLostTooOftenFails(t *testing.T) {
	s := New(Config{MaxLost: 2})
	s.Submit(Task{ID: 1}, t0)
	for i := 1; i <= 3; i++ {
		s.WorkerJoined(WorkerID(i), "h", Resources{Cores: 1}, t0)
		acts := s.WorkerLeft(WorkerID(i), t0)
		if i < 3 && len(acts) != 0 {
			t.Fatalf("round %d: %v", i, acts)
		}
		if i == 3 && (len(acts) != 1 || acts[0].(Fail).Task != 1) {
			t.Fatalf("third loss should fail the task: %v", acts)
		}
	}
}

func TestCancel(t *testing.T) {
	s := New(Config{})
	s.WorkerJoined(1, "h", Resources{Cores: 1}, t0)
	s.Submit(Task{ID: 1}, t0)
	s.Submit(Task{ID: 2}, t0)
	s.Submit(Task{ID: 3}, t0)
	if acts := s.Cancel(2, t0); len(acts) != 0 {
		t.Errorf("cancelling a waiting task: %v", acts)
	}
	acts := s.Cancel(1, t0)
	want := []Action{Abort{Task: 1, Worker: 1}, Dispatch{Task: 3, Worker: 1, Alloc: Resources{Cores: 1}}}
	if !reflect.DeepEqual(acts, want) {
		t.Errorf("cancelling a running task: %v, want %v", acts, want)
	}
	if acts := s.Cancel(99, t0); acts != nil {
		t.Errorf("unknown task: %v", acts)
	}
}

// finishTen completes ten 1-second tasks of category c on worker w.
func finishTen(s *Scheduler, c string, w WorkerID, base TaskID) {
	for i := TaskID(0); i < 10; i++ {
		s.Submit(Task{ID: base + i, Category: c}, t0)
		s.TaskDone(base+i, w, true, at(1))
		s.Fetched(base+i, w, at(1))
	}
}

func TestFastAbort(t *testing.T) {
	s := New(Config{FastAbort: FastAbort{Multiplier: 3, MaxAborts: 2, BlockFor: time.Minute}, Keepalive: Keepalive{Interval: -1}})
	s.WorkerJoined(1, "slow", Resources{Cores: 1}, t0)
	finishTen(s, "c", 1, 100)
	s.WorkerJoined(2, "fast", Resources{Cores: 1}, t0)
	s.Submit(Task{ID: 1, Category: "c"}, t0) // worker 1 (faster history is equal; lower load tie → id order)
	s.Submit(Task{ID: 2, Category: "c"}, t0)
	if acts := s.Tick(at(2.9)); acts != nil {
		t.Fatalf("before 3x the mean: %v", acts)
	}
	acts := s.Tick(at(3.5))
	// Both tasks started at t0 and exceeded 3 s: the one on worker 1 is
	// aborted and must not go back to worker 1 while worker 2 has room.
	var aborted []TaskID
	for _, a := range acts {
		if ab, ok := a.(Abort); ok {
			aborted = append(aborted, ab.Task)
			if ab.Count != 1 || ab.Final {
				t.Errorf("first abort: %+v", ab)
			}
		}
	}
	if len(aborted) != 2 {
		t.Fatalf("want both stragglers aborted: %v", acts)
	}
	for task, w := range dispatches(acts) {
		if s.tasks[task].avoid[w] {
			t.Errorf("task %d re-sent to worker %d it was aborted on", task, w)
		}
	}
	// Second round: the bar is now 4 means; the workers' alarms are set, so
	// another first-abort on either drops it. Tasks 1, 2 abort again.
	acts = s.Tick(at(3.5 + 4.5))
	for _, a := range acts {
		if ab, ok := a.(Abort); ok && (ab.Count != 2 || !ab.Final) {
			t.Errorf("second abort of %d should be final: %+v", ab.Task, ab)
		}
		if d, ok := a.(DropWorker); ok {
			t.Errorf("a task's second abort must not drop a worker: %+v", d)
		}
	}
	// Final: never aborted again, however long it runs.
	if acts := s.Tick(at(1000)); acts != nil {
		t.Errorf("task aborted after MaxAborts: %v", acts)
	}
}

// TestRandomEventsKeepInvariants drives the scheduler with random events and
// checks after each that no worker is over-committed and every task is
// accounted for exactly once.
func TestRandomEventsKeepInvariants(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s := New(Config{FastAbort: FastAbort{Multiplier: 2}})
	now := t0
	next := TaskID(1)
	nextW := WorkerID(1)
	live := map[TaskID]bool{}
	for step := 0; step < 5000; step++ {
		now = now.Add(time.Duration(rng.Intn(1000)) * time.Millisecond)
		var acts []Action
		switch r := rng.Intn(10); {
		case r < 4:
			acts = s.Submit(Task{ID: next, Category: []string{"a", "b"}[rng.Intn(2)], Need: Resources{Cores: float64(rng.Intn(3))}}, now)
			live[next] = true
			next++
		case r < 5:
			acts = s.WorkerJoined(nextW, "h"+string(rune('a'+rng.Intn(3))), Resources{Cores: float64(1 + rng.Intn(4)), MemoryMB: 1000, DiskMB: 1000}, now)
			nextW++
		case r < 6 && len(s.order) > 0:
			acts = s.WorkerLeft(s.order[rng.Intn(len(s.order))], now)
		case r < 8:
			for id, t := range s.tasks {
				switch {
				case t.fetching:
					acts = s.Fetched(id, t.fetchFrom, now)
				case len(t.runs) > 0 && rng.Intn(10) == 0:
					acts = s.GivenBack(id, t.runs[rng.Intn(len(t.runs))].worker, now)
				case len(t.runs) > 0:
					acts = s.TaskDone(id, t.runs[rng.Intn(len(t.runs))].worker, rng.Intn(5) > 0, now)
				default:
					continue
				}
				break
			}
		case r < 9:
			for id := range s.workers {
				if rng.Intn(2) == 0 {
					s.Heard(id, now)
				}
			}
			acts = s.Tick(now)
		default:
			id := TaskID(rng.Intn(int(next)) + 1)
			acts = s.Cancel(id, now)
			delete(live, id)
		}
		for _, a := range acts {
			switch a := a.(type) {
			case Fail:
				delete(live, a.Task)
			case Complete:
				delete(live, a.Task)
			}
		}
		for id, w := range s.workers {
			if _, in := s.room[id]; in != s.hasRoom(w) {
				t.Fatalf("step %d: worker %d has room %v, listed %v", step, id, s.hasRoom(w), in)
			}
		}
		if len(s.room) > len(s.workers) {
			t.Fatalf("step %d: %d workers with room, %d connected", step, len(s.room), len(s.workers))
		}
		waiting := map[TaskID]bool{}
		for _, id := range s.queue[s.head:] {
			if tk := s.tasks[id]; tk != nil && tk.waiting() {
				waiting[id] = true
			}
		}
		for id, tk := range s.tasks {
			if (len(tk.runs) > 0) != (s.running[id] == tk) {
				t.Fatalf("step %d: task %d has %d attempts; in the running set: %v", step, id, len(tk.runs), s.running[id] != nil)
			}
			if tk.waiting() && !waiting[id] {
				t.Fatalf("step %d: task %d waits but is not in the queue", step, id)
			}
		}
		copies := 0
		for id, w := range s.workers {
			var sum Resources
			for tid := range w.tasks {
				r := s.tasks[tid].runOn(id)
				if r == nil {
					t.Fatalf("step %d: worker %d lists task %d that is not running there", step, id, tid)
				}
				sum = sum.add(r.alloc, 1)
			}
			if sum != w.used || !w.used.fits(w.total) {
				t.Fatalf("step %d: worker %d used %+v, tasks %+v, total %+v", step, id, w.used, sum, w.total)
			}
			if len(w.tasks) > s.limit(w) {
				t.Fatalf("step %d: worker %d holds %d tasks, may hold %d", step, id, len(w.tasks), s.limit(w))
			}
		}
		for id, tk := range s.tasks {
			if tk.fetching && (len(tk.runs) > 0 || !s.workers[tk.fetchFrom].fetches[id]) {
				t.Fatalf("step %d: task %d is fetched from %d but runs %+v or is not listed there", step, id, tk.fetchFrom, tk.runs)
			}
			if len(tk.runs) > 2 || len(tk.runs) == 2 && tk.runs[0].copy == tk.runs[1].copy || len(tk.runs) == 1 && tk.runs[0].copy {
				t.Fatalf("step %d: task %d has attempts %+v", step, id, tk.runs)
			}
			for _, r := range tk.runs {
				if s.workers[r.worker] == nil || !s.workers[r.worker].tasks[id] {
					t.Fatalf("step %d: task %d runs on worker %d that does not list it", step, id, r.worker)
				}
				if r.copy {
					copies++
				}
			}
		}
		if copies != s.copies {
			t.Fatalf("step %d: %d copies running, scheduler counts %d", step, copies, s.copies)
		}
		if len(live) != len(s.tasks) {
			t.Fatalf("step %d: %d live tasks, scheduler holds %d", step, len(live), len(s.tasks))
		}
	}
}

// A fast-aborted task waits for another worker rather than go back to the
// one it straggled on, unless that is the only worker left.
func TestAbortedTaskShunsItsWorker(t *testing.T) {
	s := New(Config{FastAbort: FastAbort{Multiplier: 2}})
	s.WorkerJoined(1, "a", Resources{Cores: 1}, t0)
	s.WorkerJoined(2, "b", Resources{Cores: 1}, t0)
	finishTen(s, "", 1, 100)
	s.Submit(Task{ID: 1}, t0) // worker 1
	s.Submit(Task{ID: 2}, t0) // worker 2
	s.TaskDone(2, 2, true, at(0.5))
	s.Submit(Task{ID: 3}, at(1)) // worker 2, not yet a straggler at 2.5
	acts := s.Tick(at(2.5))
	if d := dispatches(acts); len(d) != 0 {
		t.Fatalf("task 1 went back to its worker while another exists: %v", acts)
	}
	if d := dispatches(s.TaskDone(3, 2, true, at(2.6))); d[1] != 2 {
		t.Errorf("task 1 should go to worker 2 once it is free: %v", d)
	}
	s2 := New(Config{FastAbort: FastAbort{Multiplier: 2}})
	s2.WorkerJoined(1, "a", Resources{Cores: 1}, t0)
	finishTen(s2, "", 1, 100)
	s2.Submit(Task{ID: 1}, t0)
	if d := dispatches(s2.Tick(at(2.5))); d[1] != 1 {
		t.Errorf("with one worker, the task goes back to it: %v", d)
	}
}

// TestDrain: a draining worker finishes what it holds, outputs included,
// and gets nothing new; its tasks' successors go elsewhere; undrained, it
// takes tasks again.
func TestDrain(t *testing.T) {
	s := New(Config{})
	s.WorkerJoined(1, "h1", Resources{Cores: 1}, t0)
	s.Submit(Task{ID: 1}, t0)
	s.Submit(Task{ID: 2}, t0)
	if acts := s.Drain(1, true, at(1)); len(acts) != 0 {
		t.Fatalf("draining dispatched %v", acts)
	}
	if n, draining, ok := s.Holds(1); n != 1 || !draining || !ok {
		t.Fatalf("Holds = %d %v %v, want 1 true true", n, draining, ok)
	}
	if acts := s.TaskDone(1, 1, true, at(2)); len(dispatches(acts)) != 0 {
		t.Fatalf("a draining worker got a task: %v", acts)
	}
	if n, _, _ := s.Holds(1); n != 1 {
		t.Fatalf("sending its outputs, it holds %d tasks, want 1", n)
	}
	s.Fetched(1, 1, at(3))
	if n, _, _ := s.Holds(1); n != 0 {
		t.Fatalf("after its outputs, it holds %d tasks, want 0", n)
	}
	if got := dispatches(s.WorkerJoined(2, "h2", Resources{Cores: 1}, at(4))); got[2] != 2 {
		t.Fatalf("task 2 should go to the new worker: %v", got)
	}
	s.Submit(Task{ID: 3}, at(5))
	if got := dispatches(s.Drain(1, false, at(6))); got[3] != 1 {
		t.Errorf("undrained, worker 1 should take task 3: %v", got)
	}
	if _, _, ok := s.Holds(9); ok {
		t.Errorf("Holds found an unknown worker")
	}
}

// TestWorkerJoinedDrained: a worker that joins drained (one its master is
// to release, back after its release) is known with its resources from
// its first event, takes none of the waiting tasks, and takes them once
// undrained; a known worker joining again drained is drained, and what it
// holds runs on.
func TestWorkerJoinedDrained(t *testing.T) {
	res := Resources{Cores: 4, MemoryMB: 4000, DiskMB: 8000}
	tests := []struct {
		name  string
		known bool // the worker joined (undrained) before, and took task 0
		holds int
	}{
		{"new worker", false, 0},
		{"known worker", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Config{SlowStart: -1})
			if tt.known {
				s.WorkerJoined(1, "h1", Resources{Cores: 1}, t0)
				if got := dispatches(s.Submit(Task{ID: 0}, t0)); got[0] != 1 {
					t.Fatalf("task 0 should run on worker 1: %v", got)
				}
			}
			for id := TaskID(1); id <= 3; id++ {
				s.Submit(Task{ID: id}, t0)
			}
			if acts := s.WorkerJoinedDrained(1, "h1", res, at(1)); len(dispatches(acts)) != 0 {
				t.Fatalf("a worker joining drained got tasks: %v", show(acts))
			}
			if _, total, n, ok := s.WorkerLoad(1); !ok || total != res || n != tt.holds {
				t.Fatalf("WorkerLoad = total %+v, %d tasks, %v; want %+v, %d, true", total, n, ok, res, tt.holds)
			}
			if n, draining, ok := s.Holds(1); n != tt.holds || !draining || !ok {
				t.Fatalf("Holds = %d %v %v, want %d true true", n, draining, ok, tt.holds)
			}
			if c := s.Counts(); c.Waiting != 3 {
				t.Fatalf("%d tasks wait, want 3", c.Waiting)
			}
			if got := dispatches(s.Drain(1, false, at(2))); len(got) != 3 {
				t.Errorf("undrained, the 4-core worker should take the 3 tasks: %v", got)
			}
		})
	}
}
