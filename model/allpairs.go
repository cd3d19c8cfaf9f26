package model

import (
	"fmt"
	"math"
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
	// serial.
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
	if serial <= 0 {
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
