package batch

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	now := time.Unix(1000, 0)
	grace := 5 * time.Second
	obs := func(p phase) observation { return observation{phase: p, state: "S"} }
	const none = -1
	tests := []struct {
		name      string
		started   bool
		goneSince time.Duration // before now; 0: not gone
		removing  bool
		exit      int
		asked     bool
		obs       observation
		listed    bool
		want      verdict
		gone      bool // whether the grace clock runs afterwards
	}{
		{name: "exit file wins", exit: 0, asked: true, obs: obs(running), listed: true, want: exited},
		{name: "exit file without asking", exit: 3, want: exited},
		{name: "exit 128 is an exit", exit: 128, want: exited},
		{name: "exit file while removing", exit: 0, removing: true, want: removed},
		{name: "signal exit while removing", exit: 143, removing: true, want: removed},
		{name: "signal exit waits for the queue", exit: 143, want: keep},
		{name: "signal exit, job still finishing", exit: 143, asked: true, obs: obs(running), listed: true, want: keep},
		{name: "signal exit, job ended", exit: 143, asked: true, obs: obs(ended), listed: true, want: settle},
		{name: "signal exit, job gone", exit: 137, asked: true, want: settle},
		{name: "not asked", exit: none, asked: false, want: keep},
		{name: "waiting", exit: none, asked: true, obs: obs(waiting), listed: true, want: keep},
		{name: "starts", exit: none, asked: true, obs: obs(running), listed: true, want: started},
		{name: "running again", exit: none, started: true, asked: true, obs: obs(running), listed: true, want: keep},
		{name: "back in the queue resets the clock", exit: none, goneSince: time.Second, asked: true, obs: obs(waiting), listed: true, want: keep},
		{name: "stuck", exit: none, asked: true, obs: obs(stuck), listed: true, want: reject},
		{name: "stuck while removing", exit: none, removing: true, asked: true, obs: obs(stuck), listed: true, want: keep},
		{name: "running while removing", exit: none, removing: true, asked: true, obs: obs(running), listed: true, want: keep},
		{name: "ended while removing", exit: none, removing: true, asked: true, obs: obs(ended), listed: true, want: removed},
		{name: "absent while removing", exit: none, removing: true, asked: true, want: removed},
		{name: "ended starts the clock", exit: none, asked: true, obs: obs(ended), listed: true, want: keep, gone: true},
		{name: "absent starts the clock", exit: none, asked: true, want: keep, gone: true},
		{name: "absent within grace", exit: none, goneSince: grace - time.Second, asked: true, want: keep, gone: true},
		{name: "absent past grace", exit: none, goneSince: grace, asked: true, want: settle, gone: true},
		{name: "ended past grace", exit: none, goneSince: grace + time.Second, asked: true, obs: obs(ended), listed: true, want: settle, gone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &spooled{}
			if tt.started {
				j.started = now.Add(-time.Minute)
			}
			if tt.goneSince > 0 {
				j.goneSince = now.Add(-tt.goneSince)
			}
			if got := judge(j, tt.removing, tt.exit, tt.asked, tt.obs, tt.listed, now, grace); got != tt.want {
				t.Errorf("judge = %v, want %v", got, tt.want)
			}
			if tt.asked && tt.exit == none && !tt.removing && j.goneSince.IsZero() == tt.gone {
				t.Errorf("grace clock running = %v, want %v", !j.goneSince.IsZero(), tt.gone)
			}
			if tt.asked && tt.listed && (!j.seen || j.last != tt.obs) {
				t.Errorf("last observation not kept: %+v", j)
			}
		})
	}
}

func TestParseSqueue(t *testing.T) {
	out := "12|PENDING|Priority\n13|PENDING|PartitionConfig\n14|RUNNING|None\n15|COMPLETING|None\n" +
		"16|CANCELLED|None\n17|TIMEOUT|None\n18|COMPLETED|None\n19|FAILED|NonZeroExitCode\n\ngarbage\n"
	want := map[string]observation{
		"12": {phase: waiting, state: "PENDING", reason: "Priority"},
		"13": {phase: stuck, state: "PENDING", reason: "PartitionConfig"},
		"14": {phase: running, state: "RUNNING"},
		"15": {phase: running, state: "COMPLETING"},
		"16": {phase: ended, state: "CANCELLED", killed: true},
		"17": {phase: ended, state: "TIMEOUT", killed: true, timeLimit: true},
		"18": {phase: ended, state: "COMPLETED"},
		"19": {phase: ended, state: "FAILED", reason: "NonZeroExitCode"},
	}
	got := parseSqueue(out)
	if len(got) != len(want) {
		t.Errorf("parsed %d jobs, want %d: %+v", len(got), len(want), got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("job %s: %+v, want %+v", id, got[id], w)
		}
	}
	if o := slurmObservation("CANCELLED by 0", ""); o.phase != ended || !o.killed {
		t.Errorf("sacct's CANCELLED by 0: %+v", o)
	}
}

func TestParseQstat(t *testing.T) {
	out := `job-ID  prior   name       user         state submit/start at     queue                          slots ja-task-ID 
-----------------------------------------------------------------------------------------------------------------
      6 0.50000 big        root         qw    11/22/2026 06:17:02                                 1000        
      7 0.25000 bad        root         Eqw   11/22/2026 06:17:02                                    1        
      8 0.55500 run        root         r     11/22/2026 06:17:03 all.q@vm                           1        
      9 0.55500 del        root         dr    11/22/2026 06:17:03 all.q@vm                           1        
     10 0.55500 held       root         hqw   11/22/2026 06:17:03                                    1        
`
	want := map[string]phase{"6": waiting, "7": stuck, "8": running, "9": running, "10": waiting}
	got := parseQstat(out)
	if len(got) != len(want) {
		t.Errorf("parsed %+v", got)
	}
	for id, p := range want {
		if got[id].phase != p {
			t.Errorf("job %s: %+v, want phase %v", id, got[id], p)
		}
	}

	jout := `==============================================================
job_number:                 6
scheduling info:            cannot run in PE "smp" because it only offers 0 slots
==============================================================
job_number:                 7
error reason          1:      11/22/2026 06:17:02 [0:13217]: error: can't open output file "/nonexist/dir/o": No such file or directory
scheduling info:            Job is in error state
`
	reasons := parseQstatErrors(jout)
	if len(reasons) != 1 || reasons["7"] != `error: can't open output file "/nonexist/dir/o": No such file or directory` {
		t.Errorf("error reasons: %q", reasons)
	}
}

func TestJobName(t *testing.T) {
	tests := map[string]string{
		"":                       "rightsize",
		"align chr1/part 2":      "align_chr1_part_2",
		"7up":                    "j7up",
		"ok-name_1.2":            "ok-name_1.2",
		strings.Repeat("x", 100): strings.Repeat("x", 64),
	}
	for in, want := range tests {
		if got := jobName(in); got != want {
			t.Errorf("jobName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The wrapper script is run here by /bin/sh directly, as a batch system
// would run it.
func TestWrapper(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		command string
		env     []string
		code    string
		stdout  string
	}{
		{"exit 5", nil, "5", ""},
		{"exit", nil, "0", ""},
		{`echo "$A|$B"`, []string{"A=x'y z", "B=$(false)"}, "0", "x'y z|$(false)\n"},
		{"exec false", nil, "1", ""},
		{"pwd", nil, "0", dir + "\n"},
	}
	for i, tt := range tests {
		j := &sharedJob{Job: Job{Command: tt.command, Env: tt.env}, dir: dir}
		script := filepath.Join(dir, "w.sh")
		status := filepath.Join(dir, "w.status")
		os.Remove(status)
		if err := os.WriteFile(script, []byte(j.wrapper(status)), 0o755); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command("/bin/sh", script).Output()
		b, err := os.ReadFile(status)
		if err != nil || strings.TrimSpace(string(b)) != tt.code || string(out) != tt.stdout {
			t.Errorf("%d %q: status %q (%v), stdout %q; want %s, %q", i, tt.command, b, err, out, tt.code, tt.stdout)
		}
	}
}

func TestTableKeepsOrder(t *testing.T) {
	tb := NewJobs()
	if err := tb.Add("a", Status{State: Queued}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Add("a", Status{State: Queued}); err == nil {
		t.Error("the same ID added twice")
	}
	steps := []struct {
		s    State
		want bool
	}{{Running, true}, {Queued, false}, {Running, false}, {Done, true}, {Failed, false}}
	for _, s := range steps {
		if got := tb.Set(Event{ID: "a", Status: Status{State: s.s}}); got != s.want {
			t.Errorf("set(%v) = %v, want %v", s.s, got, s.want)
		}
	}
	if tb.Set(Event{ID: "unknown", Status: Status{State: Done}}) {
		t.Error("set of an unknown job accepted")
	}
	for _, want := range []State{Running, Done} {
		if ev := <-tb.out; ev.State != want {
			t.Errorf("event %v, want %v", ev.State, want)
		}
	}
	tb.Close()
	if _, ok := <-tb.out; ok {
		t.Error("channel open after close")
	}
	if err := tb.Add("b", Status{}); err != ErrClosed {
		t.Errorf("add after close = %v", err)
	}
}

// scriptedSystem is a batch system whose answers the test sets: for the
// driver's decisions that the real systems cannot be made to take on cue
// (a race between a cancel and the command's exit status).
type scriptedSystem struct {
	mu    sync.Mutex
	n     int
	queue map[string]observation
	past  map[string]observation // what history says
}

func (s *scriptedSystem) kind() string { return "scripted" }

func (s *scriptedSystem) submit(ctx context.Context, j *spooled) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return strconv.Itoa(s.n), nil
}

func (s *scriptedSystem) query(ctx context.Context, ids []string) (map[string]observation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.queue), nil
}

func (s *scriptedSystem) remove(ctx context.Context, ids []string) error { return nil }

func (s *scriptedSystem) history(ctx context.Context, ids []string) map[string]observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.past)
}

func TestQueueDriverSettles(t *testing.T) {
	cancelled := observation{phase: ended, state: "CANCELLED", killed: true}
	tests := []struct {
		name    string
		exit    string // the exit-status file's content; "" for none
		queue   *observation
		history *observation
		state   State
		code    int
		is      error
		want    string
	}{
		{"command killed as the job was cancelled", "143", &cancelled, nil, Failed, 0, ErrVanished, "CANCELLED; the command was killed by signal 15"},
		{"command killed on its own", "143", &observation{phase: ended, state: "FAILED"}, nil, Done, 143, nil, ""},
		{"killed, gone, wall time in history", "137", nil, &observation{phase: ended, state: "TIMEOUT", killed: true, timeLimit: true}, Failed, 0, ErrTimeLimit, "TIMEOUT"},
		{"killed, gone, no history", "137", nil, nil, Done, 137, nil, ""},
		{"gone without a trace", "", nil, nil, Failed, 0, ErrVanished, "left the queue without reporting"},
		{"cancelled before the command ran", "", &cancelled, nil, Failed, 0, ErrVanished, "ended as CANCELLED without reporting"},
		{"not a number", "x", nil, nil, Failed, 0, nil, "not an exit status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := &scriptedSystem{queue: map[string]observation{}, past: map[string]observation{}}
			d, err := newQueueDriver(sys, Options{Spool: t.TempDir(), PollInterval: 20 * time.Millisecond,
				ExitGrace: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			// Events of the one job, in order (the contract's own checks are
			// batchtest's, for drivers that run jobs).
			next := func(s State) Event {
				t.Helper()
				for ev := range d.Events() {
					if ev.State >= s {
						return ev
					}
				}
				t.Fatalf("events closed before a %v event", s)
				return Event{}
			}
			// The job never runs: the test plays its end.
			sys.mu.Lock()
			sys.queue["1"] = observation{phase: running, state: "RUNNING"}
			sys.mu.Unlock()
			id, err := d.Submit(context.Background(), &Job{Command: "true", Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			next(Running)
			sys.mu.Lock()
			delete(sys.queue, id)
			if tt.queue != nil {
				sys.queue[id] = *tt.queue
			}
			if tt.history != nil {
				sys.past[id] = *tt.history
			}
			sys.mu.Unlock()
			if tt.exit != "" {
				qd := d.(*queueDriver)
				qd.mu.Lock()
				exitFile := qd.jobs[id].exitFile
				qd.mu.Unlock()
				if err := os.WriteFile(exitFile, []byte(tt.exit+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ev := next(Done)
			if ev.State != tt.state || ev.State == Done && ev.ExitCode != tt.code ||
				tt.is != nil && !errors.Is(ev.Err, tt.is) || tt.want != "" && (ev.Err == nil || !strings.Contains(ev.Err.Error(), tt.want)) {
				t.Errorf("got %v exit %d err %v; want %v exit %d, %v containing %q", ev.State, ev.ExitCode, ev.Err, tt.state, tt.code, tt.is, tt.want)
			}
		})
	}
}

// TestMissingCommands: a driver for a batch system whose submit command is
// not there is refused when it is made, with one message saying so.
func TestMissingCommands(t *testing.T) {
	empty := t.TempDir()
	for kind, want := range map[string]string{
		"slurm":  "sbatch is not in " + empty + "; is SLURM installed there?",
		"sge":    "qsub is not in " + empty + "; is Grid Engine installed there?",
		"condor": "condor_submit is not in " + empty + "; is HTCondor installed there?",
	} {
		d, err := New(kind, Options{Bin: empty, Spool: t.TempDir()})
		if err == nil || err.Error() != want {
			t.Errorf("New(%q) = %v, %v; want the error %q", kind, d, err, want)
		}
	}
}

func TestParseSinfoCores(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want int
		ok   bool
	}{
		{"0/2/0/2\n", 2, true},
		{"4/12/0/16\n1/3/0/4\n", 12, true},
		{"", 0, false},
		{"n/a\n", 0, false},
	} {
		got, err := parseSinfoCores(tt.out)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSinfoCores(%q) = %d, %v", tt.out, got, err)
		}
	}
}
