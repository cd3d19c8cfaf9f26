package model

import (
	"fmt"
	"math"
	"slices"
)

// AllPairsInputs are the measured inputs of the All-Pairs models.
type AllPairsInputs struct {
	N, M      int     // sizes of sets A and B
	CellTime  float64 // t: seconds per cell on one core
	ItemBytes float64 // s: mean bytes per item
	// Bandwidth is b, the bytes per second the master can send to hosts;
	// zero means 125e6 (1 Gbit/s).
	Bandwidth float64
	// Dispatch is d, the seconds between submitting a job and its start:
	// about 10–60 s on a batch system, milliseconds with Work Queue workers.
	Dispatch float64
	// Submit is the master's own time to start a job, paid one job after
	// another: a Work Queue master's send, an sbatch call. Zero means
	// Dispatch, as in the original model, where the whole latency is
	// serial; negative means none (a Work Queue master sends a task in
	// microseconds).
	Submit float64
	// MaxHosts bounds h; zero means 400, as in the original model.
	MaxHosts int
	// MaxJobTime bounds a job's running time c·t, limiting the cost of a
	// straggler; zero means one hour.
	MaxJobTime float64
	// LocalCores are this machine's cores; zero means 1.
	LocalCores int
	// Star says the master itself sends each host the items its jobs read,
	// one host after another (Work Queue; a single file server), rather
	// than along a spanning tree as in the original model.
	Star bool
}

func (in AllPairsInputs) withDefaults() AllPairsInputs {
	if in.Bandwidth <= 0 {
		in.Bandwidth = 125e6
	}
	if in.MaxHosts <= 0 {
		in.MaxHosts = 400
	}
	if in.MaxJobTime <= 0 {
		in.MaxJobTime = 3600
	}
	if in.LocalCores <= 0 {
		in.LocalCores = 1
	}
	return in
}

// AllPairsLocalTime predicts the seconds to run the whole problem on this
// machine: n·m·t spread over its cores.
func AllPairsLocalTime(in AllPairsInputs) float64 {
	in = in.withDefaults()
	return float64(in.N) * float64(in.M) * in.CellTime / float64(in.LocalCores)
}

// AllPairsClusterTime is the cluster model of Moretti et al. (seed 000 §3.4)
// for jobs of c cells on h hosts:
//
//	T(c,h) = (n·m/c)·(d + c·t)/h + d·h + ((n+m)·s/b)·log2(h)
//
// the jobs spread over the hosts, the serial dispatch of h hosts, and the
// spanning-tree distribution of the data to them. Where the master's own
// part of a dispatch (Submit) is known, the serial term is Submit·h: the
// rest of the latency passes on all hosts at once. With Star, the data
// term is what the master sends itself: each host gets the items of its
// jobs (about 2√c per job, no more than all n+m), through the master's
// one link. It returns +Inf for an
// infeasible configuration: h or c below 1, h above MaxHosts, more job slots
// than cells (h·c > n·m), or a job longer than MaxJobTime.
func AllPairsClusterTime(in AllPairsInputs, c, h int) float64 {
	in = in.withDefaults()
	cells := float64(in.N) * float64(in.M)
	switch {
	case h < 1 || c < 1 || h > in.MaxHosts:
		return math.Inf(1)
	case float64(h)*float64(c) > cells:
		return math.Inf(1)
	case float64(c)*in.CellTime > in.MaxJobTime && c > 1:
		return math.Inf(1)
	}
	jobs := cells / float64(c)
	serial := in.Submit
	switch {
	case serial < 0:
		serial = 0
	case serial == 0:
		serial = in.Dispatch
	}
	return jobs*(in.Dispatch+float64(c)*in.CellTime)/float64(h) +
		serial*float64(h) +
		AllPairsDataTime(in, c, h)
}

// AllPairsDataTime is the data term of AllPairsClusterTime: the seconds
// spent getting the items to h hosts running jobs of c cells.
func AllPairsDataTime(in AllPairsInputs, c, h int) float64 {
	in = in.withDefaults()
	if !in.Star {
		return (float64(in.N+in.M) * in.ItemBytes / in.Bandwidth) * math.Log2(float64(h))
	}
	jobs := float64(in.N) * float64(in.M) / float64(c)
	perHost := math.Min(jobs/float64(h)*2*math.Sqrt(float64(c)), float64(in.N+in.M))
	return float64(h) * perHost * in.ItemBytes / in.Bandwidth
}

// AllPairsChoice is the models' decision for a problem.
type AllPairsChoice struct {
	Local      float64 // predicted seconds on this machine
	Cluster    float64 // predicted seconds on the cluster, at the best JobCells and Hosts
	JobCells   int     // cells per job
	Hosts      int     // hosts to use
	Distribute bool    // the cluster is predicted to be faster
}

func (c AllPairsChoice) String() string {
	where := "this machine"
	if c.Distribute {
		where = "the cluster"
	}
	return fmt.Sprintf("predicted %.0f s here, %.0f s on %d hosts with jobs of %d cells: run on %s",
		c.Local, c.Cluster, c.Hosts, c.JobCells, where)
}

// ChooseAllPairs finds the job size and host count that minimise
// AllPairsClusterTime and compares the result with AllPairsLocalTime.
//
// For a fixed h the model falls as c grows (fewer dispatches), so the best c
// is the largest feasible one: min(n·m/h, MaxJobTime/t). That leaves a search
// over h alone.
func ChooseAllPairs(in AllPairsInputs) AllPairsChoice {
	in = in.withDefaults()
	choice := AllPairsChoice{Local: AllPairsLocalTime(in), Cluster: math.Inf(1)}
	cells := float64(in.N) * float64(in.M)
	if cells == 0 {
		return choice
	}
	for h := 1; h <= in.MaxHosts; h++ {
		c := math.Floor(cells / float64(h))
		if in.CellTime > 0 {
			c = math.Min(c, math.Floor(in.MaxJobTime/in.CellTime))
		}
		c = math.Max(c, 1)
		if t := AllPairsClusterTime(in, int(c), h); t < choice.Cluster {
			choice.Cluster, choice.JobCells, choice.Hosts = t, int(c), h
		}
	}
	choice.Distribute = choice.Cluster < choice.Local
	return choice
}

// AllPairsJobs returns the cells of each job of an n×m problem cut into
// jobs of about c cells as the distributed master cuts it: blocks of
// AllPairsJobShape, ⌈√c⌉ items of A by ⌈c/⌈√c⌉⌉ of B (fewer where the
// matrix is narrower), the last row and column of blocks cut short by the
// matrix's edges. The jobs are in the master's order, row of blocks after
// row.
func AllPairsJobs(n, m int, c float64) []int {
	if n < 1 || m < 1 {
		return nil
	}
	w, h := AllPairsJobShape(n, m, c)
	jobs := make([]int, 0, ((n+w-1)/w)*((m+h-1)/h))
	for y := 0; y < m; y += h {
		for x := 0; x < n; x += w {
			jobs = append(jobs, min(w, n-x)*min(h, m-y))
		}
	}
	return jobs
}

// AllPairsJobShape returns the items of A and of B of a job of about c
// cells of an n×m problem, as the distributed master cuts it: as square
// as the matrix allows.
func AllPairsJobShape(n, m int, c float64) (w, h int) {
	c = math.Min(math.Max(c, 1), float64(n)*float64(m))
	w = min(max(int(math.Ceil(math.Sqrt(c))), 1), n)
	h = min(max(int(math.Ceil(c/float64(w))), 1), m)
	return w, h
}

// AllPairsEventInputs are the inputs of AllPairsEvents: jobs, and the
// slots that run them, here and on the cluster.
type AllPairsEventInputs struct {
	Jobs     []int   // cells of each job, in the order the master submits them
	CellTime float64 // seconds per cell on one core
	// JobCores are the cores of a slot of the cluster, which a job there
	// shares among its cells; zero means 1.
	JobCores int
	// LocalCores are this machine's cores taking jobs from time 0, each
	// job without a dispatch or a job cost (the master runs it in its own
	// process), the jobs here sharing the cores cell by cell, so that one
	// left alone runs on all of them. With LocalStops, they start no job
	// after LocalUntil, but for the first LocalCores, taken at once: the
	// Work Queue master's own worker takes a task for each of its cores
	// as it connects, and drains once a worker joins from this machine,
	// whose cores those are.
	LocalCores int
	LocalStops bool
	LocalUntil float64
	// Slots are the cluster's, free from Start on (the workers' joining
	// of a Work Queue master: once, for the whole run), or, where Joins
	// are given, the i-th from Start + Joins[i·len(Joins)/Slots]: the
	// workers' joins, measured, as offsets in ascending order.
	Slots int
	Start float64
	Joins []float64
	// Dispatch is each job's wait on a batch system, from its submission
	// to the moment it may start on a free slot: a job waits it in the
	// queue whether or not a slot is free. The first round's jobs, one
	// for each slot, are submitted one after another, Submit apart, as
	// AllPairsClusterTime's serial term has it (later jobs are submitted
	// while the first run).
	Dispatch, Submit float64
	// JobCost is what a job costs on a cluster's slot beyond its cells.
	JobCost float64
}

// AllPairsEvents predicts, event by event, when the last of a run's jobs
// ends: each job in turn starts on the slot, here or on the cluster, where
// it can start first (a Work Queue master sends a task to the first worker
// with a free core; a batch.Hybrid lets a free core here take a job still
// in the queue), and occupies it for its cells and, on the cluster, its
// job cost. Jobs end in rounds: 9 jobs on 8 slots take two job times, where
// spreading the work evenly over the slots (AllPairsClusterTime) takes
// 9/8. It returns +Inf when no slot can take a job.
func AllPairsEvents(in AllPairsEventInputs) float64 {
	if len(in.Jobs) == 0 {
		return 0
	}
	until := math.Inf(1)
	if in.LocalStops {
		until = in.LocalUntil
	}
	local := sharedCores{cores: in.LocalCores}
	taken := 0
	there := make([]float64, max(in.Slots, 0))
	for i := range there {
		there[i] = in.Start
		if len(in.Joins) > 0 {
			there[i] += in.Joins[i*len(in.Joins)/len(there)]
		}
	}
	end := 0.0
	for j, cells := range in.Jobs {
		work := float64(cells) * in.CellTime
		startHere, startThere := math.Inf(1), math.Inf(1)
		if at := local.admits(); at < until || taken < in.LocalCores {
			startHere = at
		}
		// The earliest free slot of the cluster: the slots are few (the
		// callers bound jobs × slots), so a scan does.
		t := -1
		for i, f := range there {
			if t < 0 || f < there[t] {
				t = i
			}
		}
		if t >= 0 {
			ready := in.Dispatch + in.Submit*float64(min(j, in.Slots))
			startThere = math.Max(there[t], ready)
		}
		switch {
		case math.IsInf(startHere, 1) && math.IsInf(startThere, 1):
			return math.Inf(1)
		case startHere <= startThere:
			local.admit(startHere, work)
			taken++
		default:
			there[t] = startThere + work/float64(max(in.JobCores, 1)) + in.JobCost
			end = math.Max(end, there[t])
		}
	}
	return math.Max(end, local.drain())
}

// sharedCores are this machine's cores running jobs that share them cell
// by cell: n jobs run at cores/n each (all the cores for one alone), and
// a job is taken while fewer than cores run, as a worker of that many
// cores takes tasks.
type sharedCores struct {
	cores int
	now   float64   // the time of the last change
	left  []float64 // core-seconds left of each running job
}

// admits returns the earliest time, from the last change on, at which
// fewer jobs than cores run: +Inf with no cores.
func (s *sharedCores) admits() float64 {
	switch {
	case s.cores <= 0:
		return math.Inf(1)
	case len(s.left) < s.cores:
		return s.now
	}
	return s.now + slices.Min(s.left)*float64(len(s.left))/float64(s.cores)
}

// advance runs the jobs to time t, removing those that end by then.
func (s *sharedCores) advance(t float64) {
	for len(s.left) > 0 && s.now < t {
		rate := float64(s.cores) / float64(len(s.left)) // each job's
		dt := math.Min(t-s.now, slices.Min(s.left)/rate)
		for i := range s.left {
			s.left[i] -= dt * rate
		}
		s.now += dt
		s.left = slices.DeleteFunc(s.left, func(l float64) bool { return l <= 1e-12 })
	}
	if !math.IsInf(t, 1) {
		s.now = math.Max(s.now, t)
	}
}

// admit starts a job of work core-seconds at time t.
func (s *sharedCores) admit(t, work float64) {
	s.advance(t)
	s.left = append(s.left, work)
}

// drain runs the jobs to their end and returns it.
func (s *sharedCores) drain() float64 {
	s.advance(math.Inf(1))
	return s.now
}
