package makeflow

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// treeWorkflow is the shape of CCTools' storage allocation test: a root
// file copied down a binary tree three levels deep, then joined back up in
// pairs to one result, every file declared 1 byte with .SIZE.
func treeWorkflow(t *testing.T) *Workflow {
	t.Helper()
	var b strings.Builder
	rule := func(out string, ins ...string) {
		fmt.Fprintf(&b, ".SIZE %s 1\n%s: %s\n\tcp %s\n", out, out, strings.Join(ins, " "), out)
	}
	rule("O")
	// Written out as the test spells it, to keep the order of its rules.
	for _, x := range []string{"l", "r"} {
		rule("O_"+x, "O")
	}
	for _, y := range []string{"l", "r"} {
		for _, x := range []string{"l", "r"} {
			rule("O_"+x+"_"+y, "O_"+x)
		}
	}
	for _, z := range []string{"l", "r"} {
		for _, y := range []string{"l", "r"} {
			for _, x := range []string{"l", "r"} {
				rule("O_"+x+"_"+y+"_"+z, "O_"+x+"_"+y)
			}
		}
	}
	for _, y := range []string{"l", "r"} {
		for _, x := range []string{"l", "r"} {
			rule("T_"+x+"_"+y, "O_"+x+"_"+y+"_l", "O_"+x+"_"+y+"_r")
		}
	}
	rule("T_l", "T_l_l", "T_l_r")
	rule("T_r", "T_r_l", "T_r_r")
	rule("T", "T_l", "T_r")
	w, err := Parse("tree.mf", []byte(b.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestStorageFootprint(t *testing.T) {
	minimum, maximum, residual, err := StorageFootprint(treeWorkflow(t))
	// CCTools' makeflow --storage-print says "Base 5 12 1" for this
	// workflow (its test alloc_print.expected).
	if err != nil || minimum != 5 || maximum != 12 || residual != 1 {
		t.Errorf("footprint: min %d, max %d, residual %d, %v; want 5, 12, 1", minimum, maximum, residual, err)
	}
}

// runStorage drives a Scheduler with a storage limit on logical events:
// the running rules end one at a time, first started first. It returns how
// many made files were held as each rule but the first started, and the
// rule it is stuck on (-1 if none).
func runStorage(t *testing.T, w *Workflow, cfg Storage, jobs int) (held []int, stuck int, s *Scheduler) {
	t.Helper()
	s, err := NewScheduler(w, SchedulerConfig{Local: Limits{Jobs: jobs}, Storage: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	onDisk := map[string]bool{}
	var running []int
	start := func(sts []Start) {
		for _, st := range sts {
			for _, f := range w.Rules[st.Rule].Targets {
				onDisk[f.Name] = true
			}
			if st.Rule != 0 {
				held = append(held, len(onDisk))
			}
			running = append(running, st.Rule)
		}
	}
	start(s.Next())
	for len(running) > 0 {
		id := running[0]
		running = running[1:]
		next := slices.Clone(s.Ended(id, true))
		for _, name := range s.StorageFreed() {
			if !onDisk[name] {
				t.Errorf("freed %s, which is not on disk", name)
			}
			delete(onDisk, name)
		}
		if cfg.Type != StorageOff && cfg.Type != StorageOutput && s.StoragePeak() > cfg.Limit {
			t.Errorf("peak %d over the limit %d", s.StoragePeak(), cfg.Limit)
		}
		start(next)
	}
	stuck = -1
	if id, ok := s.StorageStuck(); ok {
		stuck = id
	}
	if !s.Finished() {
		t.Errorf("not finished, nothing running")
	}
	return held, stuck, s
}

func TestStorageLimit(t *testing.T) {
	w := treeWorkflow(t)
	// CCTools' alloc_min.expected counts the files in the directory as each
	// rule runs, with six there besides the workflow's (ls -l's total line,
	// the workflow, its log, two expected files and alloc.out).
	cctoolsMin := []int{8, 9, 10, 11, 11, 10, 10, 11, 11, 10, 9, 9, 10, 11, 11, 10, 10, 11, 11, 10, 9}
	for i := range cctoolsMin {
		cctoolsMin[i] -= 6
	}
	tests := []struct {
		name      string
		cfg       Storage
		jobs      int
		wantHeld  []int // nil: not checked
		wantPeak  int64
		wantStuck int
	}{
		{"min within 5 bytes runs as CCTools does", Storage{Type: StorageMin, Limit: 5}, 2, cctoolsMin, 5, -1},
		{"min below the footprint is stuck at once", Storage{Type: StorageMin, Limit: 4}, 2, nil, 4, 11},
		{"max within 12 bytes runs everything at once", Storage{Type: StorageMax, Limit: 12}, 100, nil, 12, -1},
		{"max within 8 bytes holds rules back", Storage{Type: StorageMax, Limit: 8}, 100, nil, 8, -1},
		// Greedy concurrency can fill a tight budget with half-done
		// branches; the run then stops, naming the rule, where
		// StorageMin would have finished.
		{"max within 6 bytes is stuck", Storage{Type: StorageMax, Limit: 6}, 100, nil, 6, 14},
		{"off measures only", Storage{Type: StorageOff}, 100, nil, 22, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held, stuck, s := runStorage(t, w, tt.cfg, tt.jobs)
			if tt.wantHeld != nil && !slices.Equal(held, tt.wantHeld) {
				t.Errorf("files held as rules started: %v, want %v", held, tt.wantHeld)
			}
			if s.StoragePeak() != tt.wantPeak {
				t.Errorf("peak %d, want %d", s.StoragePeak(), tt.wantPeak)
			}
			if stuck != tt.wantStuck {
				t.Errorf("stuck on rule %d, want %d", stuck, tt.wantStuck)
			}
			if done := s.Counts().Complete; (stuck < 0) != (done == len(w.Rules)) {
				t.Errorf("%d of %d rules complete, stuck on %d", done, len(w.Rules), stuck)
			}
		})
	}
}
