package factory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/lifecycle"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// sim drives a Plan as Run does, with logical time: it submits what Next
// asks for, naming jobs j1, j2, ...
type sim struct {
	t    *testing.T
	p    *Plan
	now  time.Time
	seq  int
	jobs []string // in submission order, not ended
}

func newSim(t *testing.T, l Limits) *sim {
	t.Helper()
	p, err := NewPlan(l, t0)
	if err != nil {
		t.Fatal(err)
	}
	return &sim{t: t, p: p, now: t0}
}

// fill submits as long as the plan says so and returns how many it
// submitted and the decision that stopped it.
func (s *sim) fill() (int, Decision) {
	n := 0
	for {
		d := s.p.Next(s.now)
		if d.Submit == 0 {
			return n, d
		}
		for _, k := range d.Requests {
			s.seq++
			id := fmt.Sprintf("j%d", s.seq)
			s.p.Submitted(id, k)
			s.jobs = append(s.jobs, id)
			n += k
		}
		if n > 10000 {
			s.t.Fatal("the plan never stops asking for workers")
		}
	}
}

func (s *sim) startAll() {
	for _, id := range s.jobs {
		s.p.Started(id)
	}
}

// end ends the oldest job with st.
func (s *sim) end(st batch.Status, stderr string) Outcome {
	id := s.jobs[0]
	s.jobs = s.jobs[1:]
	return s.p.Ended(batch.Event{ID: id, Status: st, Stderr: []byte(stderr)}, s.now)
}

func (s *sim) wantFill(want int) Decision {
	s.t.Helper()
	got, d := s.fill()
	if got != want {
		s.t.Fatalf("submitted %d workers, want %d (counts %+v, decision %+v)", got, want, s.p.Counts(), d)
	}
	return d
}

var (
	exit0    = batch.Status{State: batch.Done}
	exit1    = batch.Status{State: batch.Done, ExitCode: 1}
	killed9  = batch.Status{State: batch.Done, ExitCode: 137}
	vanished = batch.Status{State: batch.Failed, Err: fmt.Errorf("%w: slurm job 7 ended as CANCELLED", batch.ErrVanished)}
	rejected = batch.Status{State: batch.Failed, Err: fmt.Errorf("%w: slurm job 8 is PENDING (PartitionConfig)", batch.ErrRejected)}
	removed  = batch.Status{State: batch.Failed, Err: batch.ErrRemoved}
)

func TestTarget(t *testing.T) {
	tests := []struct {
		name    string
		lim     Limits
		demand  *Demand // nil: never learned
		running int     // of ours, started before the demand is seen
		want    int     // workers submitted in all
	}{
		{"unknown demand keeps the minimum", Limits{Min: 2, Max: 10}, nil, 0, 2},
		{"no tasks keeps the minimum", Limits{Min: 2, Max: 10}, &Demand{Masters: 1}, 0, 2},
		{"one worker per task", Limits{Min: 0, Max: 10}, &Demand{Masters: 1, Tasks: 7}, 0, 7},
		{"never more than the maximum", Limits{Min: 1, Max: 3}, &Demand{Masters: 1, Tasks: 1000}, 0, 3},
		{"tasks per worker round up", Limits{Max: 100, TasksPerWorker: 4}, &Demand{Masters: 2, Tasks: 9}, 0, 3},
		{"others' workers serve tasks too", Limits{Max: 100}, &Demand{Masters: 1, Tasks: 10, Workers: 6}, 2, 6},
		{"our own connected workers are not others'", Limits{Max: 100}, &Demand{Masters: 1, Tasks: 10, Workers: 4}, 4, 10},
		{"others' workers never push below the minimum", Limits{Min: 3, Max: 100}, &Demand{Masters: 1, Tasks: 2, Workers: 50}, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, tt.lim)
			if tt.running > 0 {
				// Ours first, as if the minimum had been raised earlier.
				s.p.lim.Min, s.p.lim.Max = tt.running, tt.running
				s.wantFill(tt.running)
				s.startAll()
				s.p.lim.Min, s.p.lim.Max = tt.lim.Min, tt.lim.Max
			}
			if tt.demand != nil {
				s.p.Observe(*tt.demand, s.now)
			}
			s.fill()
			if c := s.p.Counts(); c.Queued+c.Running != tt.want || c.Target != tt.want {
				t.Errorf("%d queued + %d running, target %d; want %d", c.Queued, c.Running, c.Target, tt.want)
			}
		})
	}
}

func TestDemandFallsNoWorkerRemoved(t *testing.T) {
	s := newSim(t, Limits{Min: 1, Max: 8})
	s.p.Observe(Demand{Masters: 1, Tasks: 8}, s.now)
	s.wantFill(8)
	s.startAll()
	s.p.Observe(Demand{Masters: 1, Tasks: 0, Workers: 8}, s.now)
	if d := s.wantFill(0); d.Submit != 0 || d.Requests != nil || d.Retry != 0 || d.Err != nil {
		t.Errorf("decision %+v, want nothing", d)
	}
	// They leave at their idle timeout; the minimum stays.
	for range 8 {
		s.end(exit0, "")
	}
	s.p.Observe(Demand{Masters: 1}, s.now)
	s.wantFill(1)
}

func TestMaxPending(t *testing.T) {
	s := newSim(t, Limits{Max: 10, MaxPending: 3})
	s.p.Observe(Demand{Masters: 1, Tasks: 10}, s.now)
	s.wantFill(3)
	s.p.Started("j1")
	s.p.Started("j2")
	s.wantFill(2)
	s.startAll()
	s.wantFill(3)
	s.startAll()
	s.wantFill(2) // 10 in all
	s.startAll()
	s.wantFill(0)
}

func TestReplacement(t *testing.T) {
	tests := []struct {
		name string
		st   batch.Status
		want Outcome
	}{
		{"idle exit", exit0, Exited},
		{"killed by a signal", killed9, Killed},
		{"cancelled by the batch system", vanished, Killed},
		{"wall-time limit", batch.Status{State: batch.Failed, Err: batch.ErrTimeLimit}, Killed},
		{"removed", removed, Removed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, Limits{Min: 2, Max: 2})
			s.wantFill(2)
			s.startAll()
			if o := s.end(tt.st, ""); o != tt.want {
				t.Errorf("outcome %v, want %v", o, tt.want)
			}
			// Replaced at once: no failure, no pause.
			if d := s.wantFill(1); d.Retry != 0 || d.Err != nil {
				t.Errorf("decision %+v after the replacement", d)
			}
			if c := s.p.Counts(); c.Failures != 0 || c.Ended[tt.want] != 1 || c.Submitted != 3 {
				t.Errorf("counts %+v", c)
			}
		})
	}
}

func TestRejectionsBackOffThenGiveUp(t *testing.T) {
	s := newSim(t, Limits{Min: 1, Max: 1, Retries: 3, Backoff: time.Second, MaxBackoff: 3 * time.Second})
	refusal := errors.New("sbatch: error: Memory specification can not be satisfied")
	var pauses []time.Duration
	for i := 0; ; i++ {
		d := s.p.Next(s.now)
		if d.Err != nil {
			if !strings.Contains(d.Err.Error(), "4 failures in a row") || !errors.Is(d.Err, refusal) {
				t.Errorf("error %q, want the count and sbatch's message", d.Err)
			}
			break
		}
		if i > 20 {
			t.Fatal("never gave up")
		}
		if d.Retry > 0 {
			pauses = append(pauses, d.Retry)
			s.now = s.now.Add(d.Retry)
			continue
		}
		if d.Submit != 1 {
			t.Fatalf("decision %+v", d)
		}
		s.p.SubmitFailed(refusal, s.now)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; fmt.Sprint(pauses) != fmt.Sprint(want) {
		t.Errorf("pauses %v, want %v", pauses, want)
	}
	// Given up for good.
	if d := s.p.Next(s.now.Add(time.Hour)); d.Err == nil {
		t.Error("the plan took up again")
	}
}

// TestRejectionsInARow: only a job that ran to an exit ends a run of
// rejections; being seen running does not, as Grid Engine shows a job
// running for a moment before it puts it in its error state.
func TestRejectionsInARow(t *testing.T) {
	tests := []struct {
		name     string
		between  func(s *sim)
		giveUp   bool
		wantText string
	}{
		{"seen running", func(s *sim) { s.startAll() }, true, "PartitionConfig"},
		{"killed while queued", func(s *sim) { s.end(vanished, "") }, true, "PartitionConfig"},
		{"a clean exit", func(s *sim) { s.startAll(); s.end(exit0, "") }, false, ""},
		{"a crash", func(s *sim) { s.startAll(); s.end(exit1, "") }, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, Limits{Min: 1, Max: 1, Retries: 1, Backoff: time.Second})
			s.wantFill(1)
			if o := s.end(rejected, ""); o != Rejected {
				t.Fatalf("outcome %v", o)
			}
			if d := s.p.Next(s.now); d.Retry != time.Second {
				t.Fatalf("decision %+v, want a pause", d)
			}
			s.now = s.now.Add(time.Second)
			s.wantFill(1)
			tt.between(s)
			if len(s.jobs) == 0 {
				s.now = s.now.Add(time.Minute)
				s.wantFill(1)
			}
			s.end(rejected, "")
			d := s.p.Next(s.now)
			if tt.giveUp != (d.Err != nil) || d.Err != nil && !strings.Contains(d.Err.Error(), tt.wantText) {
				t.Fatalf("decision %+v; want giving up %v", d, tt.giveUp)
			}
		})
	}
}

func TestCrashes(t *testing.T) {
	stderr := "time=... level=INFO msg=\"workspace created\"\nworkqueue worker: no master reachable for 5m0s: connection refused\n"
	t.Run("give up with the worker's message", func(t *testing.T) {
		s := newSim(t, Limits{Min: 1, Max: 1, Retries: 2, Backoff: time.Millisecond})
		for range 3 {
			s.now = s.now.Add(time.Hour)
			s.wantFill(1)
			s.startAll()
			if o := s.end(exit1, stderr); o != Crashed {
				t.Fatalf("outcome %v", o)
			}
		}
		d := s.p.Next(s.now.Add(time.Hour))
		if d.Err == nil || !strings.Contains(d.Err.Error(), "exited with status 1: workqueue worker: no master reachable") {
			t.Fatalf("decision %+v, want giving up with the worker's last line", d)
		}
	})
	t.Run("reset by a clean exit, not by connected workers", func(t *testing.T) {
		s := newSim(t, Limits{Min: 2, Max: 2, Retries: 1, Backoff: time.Millisecond})
		s.wantFill(2)
		s.startAll()
		s.end(exit1, stderr)
		s.end(exit0, "")
		s.now = s.now.Add(time.Second)
		s.wantFill(2)
		s.startAll()
		s.end(exit1, stderr)
		s.now = s.now.Add(time.Second)
		if d := s.wantFill(1); d.Err != nil {
			t.Fatalf("gave up: %v", d.Err)
		}
		// Someone else's workers serve the master; ours still crash.
		s.p.Observe(Demand{Masters: 1, Tasks: 2, Workers: 5}, s.now)
		s.startAll()
		s.end(exit1, stderr)
		if d := s.p.Next(s.now.Add(time.Hour)); d.Err == nil {
			t.Fatalf("decision %+v, want giving up", d)
		}
	})
	t.Run("a usage error says why", func(t *testing.T) {
		s := newSim(t, Limits{Min: 1, Max: 1, Retries: lifecycle.NoRetry})
		s.wantFill(1)
		s.end(batch.Status{State: batch.Done, ExitCode: 2}, "workqueue worker: unknown flag: --bogus\nRun 'workqueue worker --help' for usage.\n")
		d := s.p.Next(s.now)
		if d.Err == nil || !strings.HasSuffix(d.Err.Error(), "exited with status 2: workqueue worker: unknown flag: --bogus") {
			t.Fatalf("decision %+v", d)
		}
	})
	t.Run("a Go runtime crash says why", func(t *testing.T) {
		s := newSim(t, Limits{Min: 1, Max: 1, Retries: lifecycle.NoRetry})
		s.wantFill(1)
		s.end(batch.Status{State: batch.Done, ExitCode: 2},
			"fatal error: failed to reserve page summary memory\n\nruntime stack:\nruntime.throw(...)\n\t/usr/local/go/src/runtime/panic.go:1101 +0x48\n")
		d := s.p.Next(s.now)
		if d.Err == nil || !strings.HasSuffix(d.Err.Error(), "exited with status 2: fatal error: failed to reserve page summary memory") {
			t.Fatalf("decision %+v", d)
		}
	})
}

func TestNoMaster(t *testing.T) {
	s := newSim(t, Limits{Min: 1, Max: 4, NoMaster: time.Minute})
	s.wantFill(1)
	s.now = s.now.Add(50 * time.Second)
	s.p.Observe(Demand{Masters: 1}, s.now)
	s.now = s.now.Add(50 * time.Second)
	s.p.Unobserved()
	if d := s.p.Next(s.now); d.Err != nil {
		t.Fatalf("gave up %v after a master was seen", s.now.Sub(t0))
	}
	s.now = s.now.Add(20 * time.Second)
	s.p.Observe(Demand{}, s.now) // the catalog lists no master
	if d := s.p.Next(s.now); d.Err == nil || !strings.Contains(d.Err.Error(), "no master seen for 1m0s") {
		t.Fatalf("decision %+v", d)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, l := range []Limits{
		{Min: -1, Max: 1},
		{Max: 0},
		{Min: 5, Max: 4},
		{Max: 1, TasksPerWorker: -1},
		{Max: 1, Backoff: -time.Second},
	} {
		if _, err := NewPlan(l, t0); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
}

// TestBoundsHold drives plans with random events and checks that the
// workers submitted never exceed Max, and that whenever the plan is neither
// paused nor given up, at least Min are submitted once it has been
// followed.
func TestBoundsHold(t *testing.T) {
	statuses := []batch.Status{exit0, exit1, killed9, vanished, rejected, removed}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		lim := Limits{Min: r.IntN(4), MaxPending: r.IntN(3), TasksPerWorker: 1 + r.IntN(3), Retries: 999, Backoff: time.Second}
		lim.Max = lim.Min + 1 + r.IntN(5)
		s := newSim(t, lim)
		for step := range 300 {
			switch r.IntN(5) {
			case 0:
				s.p.Observe(Demand{Masters: 1, Tasks: r.IntN(30), Workers: r.IntN(8)}, s.now)
			case 1:
				s.p.Unobserved()
			case 2:
				if len(s.jobs) > 0 {
					s.p.Started(s.jobs[r.IntN(len(s.jobs))])
				}
			case 3:
				if len(s.jobs) > 0 {
					s.end(statuses[r.IntN(len(statuses))], "")
				}
			case 4:
				s.now = s.now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
			}
			_, d := s.fill()
			c := s.p.Counts()
			active := c.Queued + c.Running
			if active != len(s.jobs) || active > lim.Max || lim.MaxPending > 0 && c.Queued > max(lim.MaxPending, 0) {
				t.Fatalf("seed %d step %d: %+v with limits %+v", seed, step, c, lim)
			}
			if d.Retry == 0 && d.Err == nil && active < lim.Min && (lim.MaxPending == 0 || c.Queued < lim.MaxPending) {
				t.Fatalf("seed %d step %d: %d workers, below the minimum %d, and the plan is content", seed, step, active, lim.Min)
			}
		}
	}
}

// TestPolicies checks seed 000's pool decisions D1–D6 on logical time: two
// masters, one with 100 tasks and a capacity of 30, one with 50 tasks and
// no capacity reported yet; the ramped ones rise by at most 60 workers a
// minute.
func TestPolicies(t *testing.T) {
	d := Demand{Masters: 2, Tasks: 150, Capacities: []MasterCapacity{{Tasks: 100, Capacity: 30}}}
	t0 := time.Unix(1000, 0)
	tests := []struct {
		policy Policy
		want   []int // decisions at 0, 30, 90 and 180 s
	}{
		{D1, []int{150, 150, 150, 150}},
		{D2, []int{0, 30, 90, 150}},
		{D3, []int{80, 80, 80, 80}}, // 30 + 50 (capacity unknown: no bound)
		{D4, []int{50, 50, 50, 50}}, // 30 + the default 20
		{D5, []int{0, 30, 80, 80}},  // D3, ramped
		{D6, []int{0, 30, 50, 50}},  // D4, ramped
		{0, []int{80, 80, 80, 80}},  // the default is D3
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			p, err := NewPlan(Limits{Max: 1000, Policy: tt.policy}, t0)
			if err != nil {
				t.Fatal(err)
			}
			for i, at := range []time.Duration{0, 30 * time.Second, 90 * time.Second, 180 * time.Second} {
				now := t0.Add(at)
				p.Observe(d, now)
				if got := p.Next(now).Submit; got != tt.want[i] {
					t.Errorf("at %v: submit %d, want %d", at, got, tt.want[i])
				}
				for range tt.want[i] { // submitted and started: the next decision counts them
					id := fmt.Sprint(p.Counts().Submitted)
					p.Submitted(id, 1)
					p.Started(id)
				}
				if i+1 < len(tt.want) {
					tt.want[i+1] -= p.Counts().Running
				}
			}
		})
	}
	// A fall is not ramped: the masters' workers leave as they go idle.
	p, _ := NewPlan(Limits{Max: 1000, Policy: D6}, t0)
	p.Observe(Demand{Masters: 1, Tasks: 10}, t0.Add(time.Hour))
	p.Next(t0.Add(time.Hour))
	p.Observe(Demand{Masters: 1, Tasks: 2}, t0.Add(time.Hour+time.Second))
	p.Next(t0.Add(time.Hour + time.Second))
	if c := p.Counts(); c.Target != 2 {
		t.Errorf("after the tasks fell to 2: target %d", c.Target)
	}
	if _, err := ParsePolicy("d6"); err != nil {
		t.Error(err)
	}
	if _, err := ParsePolicy("D9"); err == nil {
		t.Error("ParsePolicy(D9) took it")
	}
}
