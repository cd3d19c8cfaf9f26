package makeflow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustParse(t testing.TB, src string) *Workflow {
	t.Helper()
	w, err := Parse("s.mf", []byte(src), []string{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustScheduler(t testing.TB, w *Workflow, cfg SchedulerConfig) *Scheduler {
	t.Helper()
	s, err := NewScheduler(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ids(starts []Start) []int {
	var out []int
	for _, s := range starts {
		out = append(out, s.Rule)
	}
	return out
}

// step is one event fed to a Scheduler and the starts it must answer with.
type step struct {
	event string // "next", "ok N", "fail N", "abort N", "halt", "remote-jobs N"
	want  []int
}

func TestScheduler(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		cfg   SchedulerConfig
		steps []step
		final Counts
	}{
		{
			name: "chain runs in order",
			src:  "a:\n\tx\nb: a\n\tx\nc: b\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 2}},
			steps: []step{
				{"next", []int{0}}, {"ok 0", []int{1}}, {"ok 1", []int{2}}, {"ok 2", nil},
			},
			final: Counts{Complete: 3, Total: 3},
		},
		{
			name: "job limit",
			src:  "a:\n\tx\nb:\n\tx\nc:\n\tx\nd:\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 2}},
			steps: []step{
				{"next", []int{0, 1}}, {"ok 1", []int{2}}, {"ok 0", []int{3}}, {"ok 2", nil}, {"ok 3", nil},
			},
			final: Counts{Complete: 4, Total: 4},
		},
		{
			name: "longest chain first",
			src:  "x:\n\tx\ny1:\n\tx\ny2: y1\n\tx\ny3: y2\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 1}},
			steps: []step{
				// Once y3 is ready both it and x end their chains: file order.
				{"next", []int{1}}, {"ok 1", []int{2}}, {"ok 2", []int{0}}, {"ok 0", []int{3}}, {"ok 3", nil},
			},
			final: Counts{Complete: 4, Total: 4},
		},
		{
			name: "longest predicted time first",
			// y1→y2→y3 is the longer chain in rules, but x alone is
			// predicted to take longer than all three.
			src: "x:\n\tx\ny1:\n\tx\ny2: y1\n\tx\ny3: y2\n\tx\n",
			cfg: SchedulerConfig{Local: Limits{Jobs: 1}, Cost: []float64{100, 1, 1, 1}},
			steps: []step{
				{"next", []int{0}}, {"ok 0", []int{1}}, {"ok 1", []int{2}}, {"ok 2", []int{3}}, {"ok 3", nil},
			},
			final: Counts{Complete: 4, Total: 4},
		},
		{
			name: "short rules kept here",
			src:  "a:\n\tx\nb:\n\tx\nc:\n\tx\n",
			// b is too short to be worth a dispatch: it takes the local
			// slot while a and c go to the remote pool.
			cfg: SchedulerConfig{Local: Limits{Jobs: 1}, Remote: &Limits{Jobs: 2}, Here: []bool{false, true, false}},
			steps: []step{
				{"next", []int{1, 0, 2}}, {"ok 1", nil}, {"ok 0", nil}, {"ok 2", nil},
			},
			final: Counts{Complete: 3, Total: 3},
		},
		{
			name: "declared cores count, undeclared do not",
			src:  "d:\n\tx\n.MAKEFLOW CORES 2\na:\n\tx\nb:\n\tx\nc:\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 4, Cores: 4}},
			steps: []step{
				{"next", []int{0, 1, 2}}, {"ok 0", nil}, {"ok 1", []int{3}}, {"ok 2", nil}, {"ok 3", nil},
			},
			final: Counts{Complete: 4, Total: 4},
		},
		{
			name: "memory is a limit too",
			src:  "a:\nMEMORY=600\n\tx\nb:\nMEMORY=600\n\tx\nc:\nMEMORY=300\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 4, MemoryMB: 1000}},
			steps: []step{
				{"next", []int{0, 2}}, {"ok 0", []int{1}}, {"ok 2", nil}, {"ok 1", nil},
			},
			final: Counts{Complete: 3, Total: 3},
		},
		{
			name: "a rule bigger than the machine runs alone",
			src:  "big:\nCORES=8\n\tx\nsmall:\nCORES=1\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 4, Cores: 2}},
			steps: []step{
				{"next", []int{0}}, {"ok 0", []int{1}}, {"ok 1", nil},
			},
			final: Counts{Complete: 2, Total: 2},
		},
		{
			name: "a failure blocks only what depends on it",
			src:  "a:\n\tx\nb: a\n\tx\nc:\n\tx\nd: c\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 2}},
			steps: []step{
				{"next", []int{0, 2}}, {"fail 0", nil}, {"ok 2", []int{3}}, {"ok 3", nil},
			},
			final: Counts{Waiting: 1, Complete: 2, Failed: 1, Total: 4},
		},
		{
			name: "retries",
			src:  "a:\n\tx\nb: a\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 1}, Retries: 2},
			steps: []step{
				{"next", []int{0}}, {"fail 0", []int{0}}, {"fail 0", []int{0}}, {"ok 0", []int{1}}, {"fail 1", []int{1}},
				{"fail 1", []int{1}}, {"fail 1", nil},
			},
			final: Counts{Complete: 1, Failed: 1, Total: 2},
		},
		{
			name: "halt and abort",
			src:  "a:\n\tx\nb:\n\tx\nc:\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 2}},
			steps: []step{
				{"next", []int{0, 1}}, {"halt", nil}, {"ok 0", nil}, {"abort 1", nil},
			},
			final: Counts{Waiting: 1, Complete: 1, Aborted: 1, Total: 3},
		},
		{
			name: "rules done in an earlier run",
			src:  "a:\n\tx\nb: a\n\tx\nc: b\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 2}, Done: []bool{true, true, false}},
			steps: []step{
				{"next", []int{2}}, {"ok 2", nil},
			},
			final: Counts{Complete: 3, Total: 3},
		},
		{
			name: "local and remote pools",
			src:  "l1:\n\tLOCAL x\nl2:\n\tLOCAL x\nr1:\n\tx\nr2:\n\tx\nr3:\n\tx\n",
			cfg:  SchedulerConfig{Local: Limits{Jobs: 1}, Remote: &Limits{Jobs: 1}},
			steps: []step{
				{"next", []int{0, 2}}, {"remote-jobs 3", []int{3, 4}}, {"ok 0", []int{1}}, {"ok 2", nil},
				{"ok 1", nil}, {"ok 3", nil}, {"ok 4", nil},
			},
			final: Counts{Complete: 5, Total: 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustParse(t, tt.src)
			s := mustScheduler(t, w, tt.cfg)
			for _, st := range tt.steps {
				var n int
				fmt.Sscanf(st.event[strings.IndexByte(st.event+" ", ' '):]+" 0", "%d", &n)
				var got []Start
				switch strings.Fields(st.event)[0] {
				case "next":
					got = s.Next()
				case "ok":
					got = s.Ended(n, true)
				case "fail":
					got = s.Ended(n, false)
				case "abort":
					s.Abort(n)
				case "halt":
					s.Halt()
				case "remote-jobs":
					got = s.SetLimits(true, Limits{Jobs: n})
				}
				if !slices.Equal(ids(got), st.want) {
					t.Fatalf("after %q: started %v, want %v", st.event, ids(got), st.want)
				}
			}
			if !s.Finished() {
				t.Error("not Finished at the end")
			}
			if c := s.Counts(); c != tt.final {
				t.Errorf("counts = %+v, want %+v", c, tt.final)
			}
		})
	}
}

func TestSchedulerStartDetails(t *testing.T) {
	w := mustParse(t, "l:\n\tLOCAL x\nr:\n\tx\n")
	s := mustScheduler(t, w, SchedulerConfig{Local: Limits{Jobs: 1}, Remote: &Limits{Jobs: 1}, Retries: 1})
	got := slices.Clone(s.Next())
	want := []Start{{Rule: 0, Attempt: 1}, {Rule: 1, Attempt: 1, Remote: true}}
	if !slices.Equal(got, want) {
		t.Fatalf("Next = %+v, want %+v", got, want)
	}
	if again := s.Ended(1, false); len(again) != 1 || again[0] != (Start{Rule: 1, Attempt: 2, Remote: true}) {
		t.Errorf("retry = %+v", again)
	}
	if s.State(1) != Running || s.Attempts(1) != 2 {
		t.Errorf("state %v attempts %d", s.State(1), s.Attempts(1))
	}
	if got := s.Blocked(); got != nil {
		t.Errorf("Blocked = %v", got)
	}
}

// TestSchedulerProperties drives the scheduler through random workflows,
// finishing running rules in random order (some failing), and checks it
// against what a correct scheduler must do: a rule starts only when every
// rule that makes one of its inputs is complete, never runs twice at once,
// limits hold at all times, and at the end exactly the rules that do not
// depend on a failure are complete.
func TestSchedulerProperties(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(40)
		var src strings.Builder
		for i := range n {
			fmt.Fprintf(&src, "f%d:", i)
			for j := range i {
				if rng.IntN(n) < 2 {
					fmt.Fprintf(&src, " f%d", j)
				}
			}
			fmt.Fprintf(&src, "\nCORES=%d\n\tx\n", rng.IntN(3))
		}
		w := mustParse(t, src.String())
		jobs, cores := 1+rng.IntN(4), int64(1+rng.IntN(4))
		s := mustScheduler(t, w, SchedulerConfig{Local: Limits{Jobs: jobs, Cores: cores}})
		g := newGraph(w)
		parents := make([][]int, n)
		for p, kids := range g.children {
			for _, c := range kids {
				parents[c] = append(parents[c], p)
			}
		}
		fails := map[int]bool{}
		state := make([]RuleState, n)
		var running []int
		check := func(starts []Start) {
			for _, st := range starts {
				id := st.Rule
				if state[id] != Waiting {
					t.Fatalf("seed %d: rule %d started while %v", seed, id, state[id])
				}
				for _, p := range parents[id] {
					if state[p] != Complete {
						t.Fatalf("seed %d: rule %d started before its parent %d completed", seed, id, p)
					}
				}
				state[id] = Running
				running = append(running, id)
			}
			if len(running) > jobs {
				t.Fatalf("seed %d: %d running, limit %d", seed, len(running), jobs)
			}
			// Undeclared cores do not count; a rule asking for more than
			// the pool has runs with no other rule that declares cores.
			used, declaring := int64(0), 0
			for _, id := range running {
				if c := w.Rules[id].Resources.Cores; c > 0 {
					used += c
					declaring++
				}
			}
			if used > cores && declaring > 1 {
				t.Fatalf("seed %d: %d cores used, limit %d", seed, used, cores)
			}
		}
		check(s.Next())
		for len(running) > 0 {
			k := rng.IntN(len(running))
			id := running[k]
			running = slices.Delete(running, k, k+1)
			ok := rng.IntN(10) > 0
			if ok {
				state[id] = Complete
			} else {
				state[id] = Failed
				fails[id] = true
			}
			check(s.Ended(id, ok))
		}
		if !s.Finished() {
			t.Fatalf("seed %d: not done with nothing running", seed)
		}
		// Exactly the rules with no failed ancestor completed.
		tainted := make([]bool, n)
		for id := range n {
			for _, p := range parents[id] {
				tainted[id] = tainted[id] || tainted[p] || fails[p]
			}
			want := Complete
			switch {
			case fails[id]:
				want = Failed
			case tainted[id]:
				want = Waiting
			}
			if s.State(id) != want || state[id] != want {
				t.Fatalf("seed %d: rule %d is %v (seen %v), want %v", seed, id, s.State(id), state[id], want)
			}
		}
	}
}

func BenchmarkScheduler(b *testing.B) {
	var src strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&src, "out_%d:\n\techo %d > out_%d\n", i, i, i)
	}
	src.WriteString("gather:")
	for i := range 2000 {
		fmt.Fprintf(&src, " out_%d", i)
	}
	src.WriteString("\n\tcat out_* > gather\n")
	w := mustParse(b, src.String())
	b.ReportAllocs()
	for b.Loop() {
		s := mustScheduler(b, w, SchedulerConfig{Local: Limits{Jobs: 2}})
		queue := slices.Clone(ids(s.Next()))
		for len(queue) > 0 {
			id := queue[0]
			queue = append(queue[1:], ids(s.Ended(id, true))...)
		}
	}
}
