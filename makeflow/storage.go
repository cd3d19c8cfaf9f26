package makeflow

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// StorageType is how a run holds to a disk budget (CCTools'
// --storage-type; the numbers are CCTools').
type StorageType int

const (
	// StorageMax runs rules concurrently as the other limits allow, each
	// starting only while the files the run made and still holds, and the
	// declared outputs of the rules running, fit in the limit.
	StorageMax StorageType = 0
	// StorageMin runs one rule at a time, depth first, so that the run
	// needs the least storage (the minimum footprint --storage-print
	// reports), within the limit.
	StorageMin StorageType = 1
	// StorageOutput counts only the declared outputs of the running rules.
	StorageOutput StorageType = 2
	// StorageOff limits nothing; the run only measures its peak.
	StorageOff StorageType = 3
)

// ParseStorageType reads --storage-type: CCTools' number (0 max, 1 min,
// 2 output, 3 off) or its name.
func ParseStorageType(s string) (StorageType, error) {
	for i, name := range []string{"max", "min", "output", "off"} {
		if s == strconv.Itoa(i) || strings.EqualFold(s, name) {
			return StorageType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown storage type %q: 0 (max), 1 (min), 2 (output) or 3 (off)", s)
}

func (t StorageType) String() string {
	if t >= 0 && int(t) < 4 {
		return []string{"max", "min", "output", "off"}[t]
	}
	return "StorageType(" + strconv.Itoa(int(t)) + ")"
}

// Storage configures the disk budget of a run (Options.Storage,
// SchedulerConfig.Storage). Sizes are what .SIZE declares, then what the
// files measure once made; a file of unknown size counts 0. The workflow's
// own inputs are not counted: they are there before it runs.
type Storage struct {
	Type  StorageType
	Limit int64 // bytes; ignored by StorageOff
}

// storage is the Scheduler's account of the disk a run uses. A made file
// counts from the start of the rule that makes it (its declared size, then
// its measured one) until it is collected: once every rule that reads it
// has completed, unless it is one of the workflow's results.
type storage struct {
	Storage
	size    map[string]int64 // declared, then measured
	readers map[string]int   // rules that still have to read the file
	held    map[string]bool  // made files on disk (or being made)
	keep    map[string]bool  // never collected: the workflow's results and inputs
	running int64            // declared outputs of the running rules
	used    int64            // the held files' bytes
	peak    int64
	freed   []string // collected, for the driver to delete
	seq     float64  // readiness order, for depth first
	stuckOn int      // a ready rule that can never fit; -1 if none
}

func newStorage(g *graph, cfg Storage, done []bool) *storage {
	st := &storage{Storage: cfg, size: map[string]int64{}, readers: map[string]int{}, held: map[string]bool{},
		keep: outputFiles(g.w), stuckOn: -1}
	for name, n := range g.w.Sizes {
		st.size[name] = n
	}
	for _, f := range g.w.Inputs {
		st.keep[f] = true
	}
	for id, r := range g.w.Rules {
		for _, f := range r.Sources {
			if done == nil || !done[id] {
				st.readers[f.Name]++
			}
		}
	}
	for id, r := range g.w.Rules {
		if done != nil && done[id] {
			for _, f := range r.Targets {
				st.hold(f.Name)
			}
		}
	}
	st.collect()
	return st
}

func (st *storage) limited() bool { return st.Type != StorageOff }

// need is what starting rule r adds to the account.
func (st *storage) need(r *Rule) int64 {
	var n int64
	for _, f := range r.Targets {
		n += st.size[f.Name]
	}
	return n
}

// fits reports whether rule r may start now.
func (st *storage) fits(r *Rule) bool {
	if !st.limited() {
		return true
	}
	n := st.running + st.need(r)
	if st.Type != StorageOutput {
		n = st.used + st.need(r)
	}
	return n <= st.Limit
}

func (st *storage) hold(name string) {
	if !st.held[name] {
		st.held[name] = true
		st.used += st.size[name]
	}
}

// bestFitting returns the first rule of h, in its order, that fits, or
// -1: a look at every ready rule, paid only when the storage limit holds
// back the best.
func (st *storage) bestFitting(h *readyHeap, rules []*Rule) int32 {
	best := int32(-1)
	for _, id := range h.ids {
		if st.fits(rules[id]) && (best < 0 || h.before(id, best)) {
			best = id
		}
	}
	return best
}

// started records that rule r starts.
func (st *storage) started(r *Rule) {
	st.running += st.need(r)
	for _, f := range r.Targets {
		st.hold(f.Name)
	}
	st.peak = max(st.peak, st.used)
}

// ended records that rule r ended: its outputs stay if it completed, its
// inputs lose a reader, and what is left with none is collected.
func (st *storage) ended(r *Rule, ok bool) {
	st.running -= st.need(r)
	if !ok {
		for _, f := range r.Targets {
			if st.held[f.Name] {
				delete(st.held, f.Name)
				st.used -= st.size[f.Name]
			}
		}
		return
	}
	for _, f := range r.Sources {
		st.readers[f.Name]--
	}
	st.collect()
}

// collect frees the held files no rule has left to read, unless they are
// kept; with no limit, nothing is collected.
func (st *storage) collect() {
	if !st.limited() {
		return
	}
	for name := range st.held {
		if st.readers[name] <= 0 && !st.keep[name] {
			if _, read := st.readers[name]; !read {
				continue // a result nobody reads, outside MAKEFLOW_OUTPUTS
			}
			delete(st.held, name)
			st.used -= st.size[name]
			st.freed = append(st.freed, name)
		}
	}
	slices.Sort(st.freed)
}

// measure replaces a file's declared size by its size on disk.
func (st *storage) measure(name string, size int64) {
	if st.held[name] {
		st.used += size - st.size[name]
		st.peak = max(st.peak, st.used)
	}
	st.size[name] = size
}

// StorageFreed returns the files the storage limit collected since the
// last call, for the driver to delete.
func (s *Scheduler) StorageFreed() []string {
	if s.storage == nil {
		return nil
	}
	f := s.storage.freed
	s.storage.freed = nil
	return f
}

// FileSize tells the scheduler a made file's size on disk.
func (s *Scheduler) FileSize(name string, size int64) {
	if s.storage != nil {
		s.storage.measure(name, size)
	}
}

// StoragePeak returns the most bytes the run's files held at once.
func (s *Scheduler) StoragePeak() int64 {
	if s.storage == nil {
		return 0
	}
	return s.storage.peak
}

// StorageStuck returns a ready rule that cannot start, nothing running,
// because the storage limit is too small for it; ok is false if none.
func (s *Scheduler) StorageStuck() (rule int, ok bool) {
	if s.storage == nil || s.storage.stuckOn < 0 {
		return 0, false
	}
	return s.storage.stuckOn, true
}

// StorageFootprint simulates w on the scheduler, every rule succeeding,
// and returns the least storage it needs (one rule at a time, depth first,
// collecting as it goes: CCTools' minimum footprint), the most (every rule
// as soon as it is ready) and what remains at the end (the results).
func StorageFootprint(w *Workflow) (minimum, maximum, residual int64, err error) {
	g := newGraph(w)
	peak := func(typ StorageType, jobs int) (int64, int64, error) {
		s, err := newScheduler(g, SchedulerConfig{Local: Limits{Jobs: jobs}, Storage: &Storage{Type: typ, Limit: 1<<63 - 1}})
		if err != nil {
			return 0, 0, err
		}
		running := slices.Clone(s.Next())
		for len(running) > 0 {
			var next []Start
			for _, st := range running {
				next = append(next, s.Ended(st.Rule, true)...)
			}
			running = next
		}
		return s.storage.peak, s.storage.used, nil
	}
	if minimum, residual, err = peak(StorageMin, 1); err != nil {
		return 0, 0, 0, err
	}
	maximum, _, err = peak(StorageMax, len(w.Rules)+1)
	return minimum, maximum, residual, err
}
