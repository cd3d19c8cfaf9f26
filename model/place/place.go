// Package place decides where a workload runs: on this machine's cores
// (multicore), as jobs on a cluster (distributed), or on both at once
// (hybrid: this machine's cores take jobs as one more worker of the
// distributed master while the cluster's arrive). It compares the
// predictions of package model's performance models, fed with measured
// inputs that each say where they came from and how old they are, and
// explains its choice.
//
// It also learns: a Record of each run's prediction and measured time is
// appended to a History (JSON lines), and the next decision for the same
// work on the same back end multiplies each mode's prediction by the
// correction the earlier runs call for.
//
// The package does no I/O but the history file: the inputs are measured by
// its callers (the function sample, package model/cluster for the
// cluster), so that every decision can be tested with logical inputs.
package place

import (
	"fmt"
	"time"
)

// Mode is where a workload runs.
type Mode int

const (
	Multicore   Mode = iota // this machine's cores only
	Distributed             // jobs on the cluster only
	Hybrid                  // this machine's cores and the cluster's, one master
)

func (m Mode) String() string {
	switch m {
	case Multicore:
		return "multicore"
	case Distributed:
		return "distributed"
	case Hybrid:
		return "hybrid"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// A Value is one input of a model with its provenance.
type Value struct {
	V float64
	// Source says where V came from: "sampled here, 50 calls",
	// "sinfo", "probe job". Empty means nothing was measured and V is the
	// documented default (Assumed reports it).
	Source string
	// Measured is when V was measured; the zero time means just now (or
	// never, for an assumed value).
	Measured time.Time
}

// Assumed reports whether v is a default rather than a measurement.
func (v Value) Assumed() bool { return v.Source == "" }

// Describe says where v came from and, for a value measured before now,
// how old it is.
func (v Value) Describe(now time.Time) string {
	if v.Assumed() {
		return "assumed: nothing measured yet"
	}
	if age := now.Sub(v.Measured); !v.Measured.IsZero() && age >= time.Second {
		return fmt.Sprintf("%s, %s old", v.Source, Age(age))
	}
	return v.Source
}

// Age writes a duration the way a person reads an age: "40 s", "3 min",
// "2 h", "5 days".
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// Cluster is what is known of the cluster a user has: which back end, how
// wide it is now, and what a job costs to start and to feed.
type Cluster struct {
	// Kind is the batch type, as -T takes it: wq, slurm, sge, condor or
	// local. Empty means there is no cluster.
	Kind string
	// Named says how the cluster was found: "RIGHTSIZE_CLUSTER",
	// "~/.config/rightsize/cluster", "detected: sinfo answers".
	Named string
	// Project is the Work Queue project name workers look for (wq only).
	Project string
	// Port is the port a Work Queue master listens on (wq only; 0 for the
	// default).
	Port int

	// Delay, for kind local only, holds each job this long (seconds)
	// before it starts: the local driver then stands for a cluster with
	// that dispatch latency, in benchmarks and tests of placement.
	Delay float64

	Hosts        Value // hosts (workers, nodes) available now
	CoresPerHost Value // cores each host gives a job
	// Dispatch is the seconds between submitting a job and its start. On
	// Work Queue it is the workers' start-up, paid once at the start of a
	// run: the time from a master's start to its workers' joining (their
	// mean, as a run saw them join); the master then sends a task the
	// moment a worker has a free core.
	Dispatch Value
	// Joins are, on Work Queue, the seconds from a master's start to
	// each of its workers' joining, in ascending order (as a run saw
	// them; Dispatch is their mean), for the models that follow jobs one
	// by one; nil where not measured.
	Joins []float64
	// HereWorkers are the cluster's workers that connect from this
	// machine (Work Queue; as a run saw them join), after HereJoin
	// seconds, the first of them: they run on this machine's cores, so a
	// hybrid run's own worker takes no more tasks once the first joins,
	// and this machine's cores are then in the cluster's width, not
	// beside it.
	HereWorkers Value
	HereJoin    float64
	// Submit is the master's own seconds per job, paid one job after
	// another (a send to a worker, an sbatch call); the rest of Dispatch
	// passes for every job at once. Zero means all of Dispatch is serial,
	// as the seed's model has it.
	Submit Value
	// JobCost is what a job costs on its host beyond its work: starting
	// the program, reading its inputs, writing its results. Runs measure
	// it; it adds to Dispatch for every job.
	JobCost   Value
	Bandwidth Value // bytes per second from this machine to the hosts
}

// Slots is how many one-core jobs the cluster runs at once.
func (c *Cluster) Slots() int {
	if c == nil {
		return 0
	}
	return max(int(c.Hosts.V), 0) * max(int(c.CoresPerHost.V), 1)
}

// sharedFS reports whether the cluster's jobs read this machine's files
// where they are (a batch system), so that a job runs here or there alike.
func (c *Cluster) sharedFS() bool {
	return c != nil && (c.Kind == "slurm" || c.Kind == "sge" || c.Kind == "condor")
}

// JobCores is how many cores each job takes: on a batch system whose
// hosts have several cores, a whole host's (the multicore node option of
// seed 000: one dispatch per host rather than per core); one elsewhere (a
// Work Queue worker packs one-core tasks itself).
func (c *Cluster) JobCores() int {
	if c.sharedFS() && c.CoresPerHost.V > 1 {
		return int(c.CoresPerHost.V)
	}
	return 1
}

// Default values of the cluster inputs, used (and said to be assumed)
// where nothing was measured.
const (
	DefaultBandwidth = 125e6 // bytes/s: 1 Gbit/s
)
