package place

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/rightsize/rightsize/model"
)

// A Prediction is one mode's predicted running time, after correction.
type Prediction struct {
	Mode    Mode
	Seconds float64 // +Inf where the mode cannot run (no cluster)
	// Model is the models' own figure, before Correction.
	Model      float64
	Correction Correction
	// Detail says how the mode would run: "jobs of 40×40 items on 8 hosts".
	Detail string
}

// An Input is one line of a decision's inputs: a name, its value in words,
// and where it came from.
type Input struct {
	Name, Value, Source string
}

// A Decision is where a workload runs and why.
type Decision struct {
	Mode        Mode
	Predictions []Prediction // one per mode, Multicore first
	Inputs      []Input
	Reason      string
	Cluster     *Cluster // the cluster the decision saw, or nil

	// JobCells (All-Pairs) and Block (Wavefront) are the job size the
	// chosen mode's model assumed; 0 for multicore. JobCores are the
	// cores each job takes (Cluster.JobCores).
	JobCells int
	Block    int
	JobCores int

	// KeepHere (Makeflow) marks the rules, in the order given, that run on
	// this machine when the workflow runs on the cluster: those the user
	// keeps here and those too short to be worth their dispatch.
	KeepHere []bool

	// jobCells and blocks are the job sizes the models found for each
	// cluster mode, whichever is chosen, for Force.
	jobCells [3]int
	blocks   [3]int
	keepHere [3][]bool
}

// Predicted returns the prediction for m (+Inf if there is none).
func (d *Decision) Predicted(m Mode) float64 {
	for _, p := range d.Predictions {
		if p.Mode == m {
			return p.Seconds
		}
	}
	return math.Inf(1)
}

// Line says the decision in one line, for -v.
func (d *Decision) Line() string {
	return fmt.Sprintf("%s: predicted %s (%s)", d.Mode, Seconds(d.Predicted(d.Mode)), d.Reason)
}

// Explain writes the inputs, each prediction and the choice, for
// --explain.
func (d *Decision) Explain(w io.Writer) {
	fmt.Fprintf(w, "inputs:\n")
	width := 0
	for _, in := range d.Inputs {
		width = max(width, len(in.Name))
	}
	for _, in := range d.Inputs {
		fmt.Fprintf(w, "  %-*s  %s (%s)\n", width, in.Name, in.Value, in.Source)
	}
	fmt.Fprintf(w, "predictions:\n")
	for _, p := range d.Predictions {
		mark := " "
		if p.Mode == d.Mode {
			mark = "*"
		}
		line := fmt.Sprintf(" %s %-11s  %s", mark, p.Mode, Seconds(p.Seconds))
		if p.Correction.Runs > 0 {
			line += fmt.Sprintf(" (model %s, %v)", Seconds(p.Model), p.Correction)
		}
		if p.Detail != "" {
			line += ": " + p.Detail
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "choice: %s, because %s\n", d.Mode, d.Reason)
}

// Force sets the mode to m, whatever the models chose, because of why
// ("-T wq asks for it"); the predictions stay, for comparison.
func (d *Decision) Force(m Mode, why string) {
	if m == d.Mode {
		d.Reason = why + ", as the models would have chosen"
		return
	}
	d.Reason = fmt.Sprintf("%s (the models chose %s: %s)", why, d.Mode, d.Reason)
	d.Mode = m
	d.setSize()
}

// setSize sets JobCells or Block to the chosen mode's job size.
func (d *Decision) setSize() {
	d.JobCells, d.Block, d.JobCores, d.KeepHere = 0, 0, 0, nil
	if d.Mode != Multicore {
		d.JobCells, d.Block, d.JobCores = d.jobCells[d.Mode], d.blocks[d.Mode], d.Cluster.JobCores()
		d.KeepHere = d.keepHere[d.Mode]
	}
}

// Seconds writes a predicted duration for a person: "0.42 s", "12 s",
// "3 min 20 s", "never" for +Inf.
func Seconds(s float64) string {
	switch {
	case math.IsInf(s, 1) || math.IsNaN(s):
		return "—"
	case s < 10:
		return fmt.Sprintf("%.2g s", s)
	case s < 120:
		return fmt.Sprintf("%.0f s", s)
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

// localMargin is how much faster one mode must be predicted to be than
// another before it is chosen: within it the models cannot tell them
// apart.
const localMargin = 0.05

// localMinGain is the least time, in seconds, a distributed run must be
// predicted to save before it is chosen over this machine: a run shorter
// than that is over before a cluster could matter, the models' error on
// such times (a sampled call of a few milliseconds on a loaded machine)
// is larger than the gain, and a dispatch that goes wrong (a queue that
// fills, workers slower than measured) leaves the whole run waiting. A
// hybrid run needs it only on a cluster whose width or dispatch is
// assumed (see hybridSafe).
const localMinGain = 0.5

// hybridSafe reports whether a hybrid run on c needs only localMargin to
// be chosen over this machine, not localMinGain: c's width and dispatch
// are known — measured (the connected workers, a listing, a probe, an
// earlier run) or given by the user — not assumed. A hybrid run keeps this
// machine's cores busy from its first second, cell by cell or job by job
// as multicore would, and hands the cluster only work they would have
// waited for, so a cluster slower than its figures costs it little; what
// remains is the risk of figures nobody measured.
func (c *Cluster) hybridSafe() bool {
	return !c.Hosts.Assumed() && !c.Dispatch.Assumed()
}

// choose picks the fastest prediction, preferring multicore within
// localMargin (and, for a distributed run, or a hybrid one on a cluster
// not measured, within localMinGain: this machine is the one without
// queues, stragglers or lost workers) and hybrid to distributed within
// localMargin (this machine's cores start at once), and says why.
func (d *Decision) choose() {
	if len(d.Predictions) == 3 {
		d.boundUntried()
	}
	local, dist, hy := d.Predictions[0], d.Predictions[1], d.Predictions[2]
	switch {
	case d.Cluster == nil:
		d.Mode, d.Reason = Multicore, "there is no cluster (name one in RIGHTSIZE_CLUSTER or ~/.config/rightsize/cluster)"
		return
	case d.Cluster.Slots() == 0:
		d.Mode, d.Reason = Multicore, "the cluster has no hosts free now"
		return
	}
	best := hy
	if dist.Seconds*(1+localMargin) < hy.Seconds {
		best = dist
	}
	reason, ok := d.beats(best, local)
	if !ok && best.Mode == Distributed {
		// Distributed would be faster still, but not by enough to leave
		// this machine: hybrid may be, keeping its cores busy.
		if _, hok := d.beats(hy, local); hok {
			best, ok = hy, true
		}
	}
	if !ok {
		d.Mode, d.Reason = Multicore, reason
		return
	}
	d.Mode = best.Mode
	d.Reason = fmt.Sprintf("predicted %.1f× faster than this machine alone", local.Seconds/best.Seconds)
	if best.Mode == Hybrid && local.Seconds-best.Seconds < localMinGain {
		d.Reason += fmt.Sprintf("; it saves under %.1f s, but a hybrid run on a cluster of measured width and dispatch needs only the %.0f%%: this machine's cores work from its start", localMinGain, 100*localMargin)
	}
}

// beats reports whether cluster mode p is predicted enough faster than
// this machine alone (local) to be chosen, and if not, why.
func (d *Decision) beats(p, local Prediction) (string, bool) {
	switch {
	case local.Seconds <= p.Seconds:
		return "this machine is predicted fastest", false
	case local.Seconds <= p.Seconds*(1+localMargin):
		return fmt.Sprintf("the %s run is predicted less than %.0f%% faster", p.Mode, 100*localMargin), false
	case local.Seconds-p.Seconds >= localMinGain:
		return "", true
	case p.Mode == Hybrid && d.Cluster.hybridSafe():
		return "", true
	case p.Mode == Hybrid:
		return fmt.Sprintf("the hybrid run is predicted to save less than %.1f s, on a cluster whose width or dispatch is assumed", localMinGain), false
	}
	return fmt.Sprintf("the %s run is predicted to save less than %.1f s", p.Mode, localMinGain), false
}

// apply corrects the model's prediction for mode m on backend by what
// earlier runs of m measured (cs, from Corrections; nil corrects nothing).
// A mode never run there keeps its model's figure: the hybrid and
// distributed models err differently (the hybrid's own worker, the
// hybrid's smaller jobs), so that one's correction, borrowed, carried its
// error into the other (×1.22–1.56 from hybrid runs on Work Queue, onto
// distributed predictions already too slow). What the modes share is
// bounded instead: see boundUntried.
func apply(cs map[string]Correction, m Mode, backend string, model float64) Prediction {
	c, ok := cs[CorrectionKey(m, backend)]
	if !ok || c.Runs == 0 {
		c = Correction{Factor: 1, Spread: 1}
	}
	return Prediction{Mode: m, Model: model, Seconds: model * c.Factor, Correction: c}
}

// boundUntried predicts a distributed run never measured no faster than
// a hybrid one measured: a hybrid run is the distributed run with this
// machine's cores taking the jobs the cluster's would have waited for, so
// a cluster slower than its figures, which the hybrid runs found, is as
// slow for it. (The converse bounds nothing: the hybrid's model already
// takes the distributed one's figure where that is faster.)
func (d *Decision) boundUntried() {
	dist, hy := &d.Predictions[1], &d.Predictions[2]
	if dist.Correction.Runs > 0 || hy.Correction.Runs == 0 || dist.Seconds >= hy.Seconds {
		return
	}
	dist.Seconds = hy.Seconds
	note := fmt.Sprintf("no faster than the hybrid run, as %v measured it", hy.Correction)
	if dist.Detail != "" {
		note = dist.Detail + "; " + note
	}
	dist.Detail = note
}

// Machine is what the decision needs of this machine.
type Machine struct {
	Cores Value
}

// hybridTime predicts a run of work core-seconds on local cores that start
// now and remote slots that join after start seconds, each counting the
// cores' or slots' useful work (the rest of their time is what a job costs
// beyond its cells, and, remote, its dispatch): the time at which the two
// together have done the work.
func hybridTime(work, local, remote, start float64) float64 {
	alone := work / local
	if remote <= 0 || alone <= start {
		return alone
	}
	return (work + remote*start) / (local + remote)
}

// perJob is what every job pays beyond its work: its dispatch and its
// cost on the host.
func (c *Cluster) perJob() float64 { return c.Dispatch.V + c.JobCost.V }

// startDispatch splits the cluster's dispatch into what its slots wait
// once, at the start, and what each job waits. A batch system's queue
// holds every job. Work Queue sends a task the moment a worker has a free
// core (a run's least wait is microseconds once its workers are there),
// and the wait a run measures beyond that is its workers' start-up, their
// connection to the master the run starts: once, not for every job (a
// first run's 32 ms, charged for each of 65 blocks of a 12×12 Wavefront,
// predicted 2.2 s where it took 1.6 s; an All-Pairs run's first 8 jobs
// charged a 0.37 s start-up each, and 8 hosts one after another,
// predicted 14 s for a run of 11.9 s).
func (c *Cluster) startDispatch() (start, perJob float64) {
	if c.Kind == "wq" {
		return c.Dispatch.V, 0
	}
	return 0, c.Dispatch.V
}

// maxEventWork bounds the jobs times the slots of an All-Pairs run that
// the decision follows job by job (model.AllPairsEvents); more are
// predicted as work flowing evenly over the slots.
const maxEventWork = 1 << 16

// maxRoundsSlots bounds the slots over which the decision searches the
// host count of a distributed All-Pairs run job by job.
const maxRoundsSlots = 64

// allPairsEventInputs are the inputs of model.AllPairsEvents for jobs js
// of cells of cellTime (on one core) on hosts of c, joining after start.
func allPairsEventInputs(c *Cluster, js []int, cellTime float64, hosts int, start float64) model.AllPairsEventInputs {
	_, perJob := c.startDispatch()
	ev := model.AllPairsEventInputs{
		Jobs: js, CellTime: cellTime, JobCores: c.JobCores(),
		Slots: hosts, Start: start,
		Dispatch: perJob, JobCost: c.JobCost.V,
	}
	if start > 0 && len(c.Joins) > 0 {
		// The workers join one by one, as a run saw them, not all at
		// their mean.
		ev.Start, ev.Joins = 0, c.Joins
	}
	if perJob > 0 {
		ev.Submit = c.serialSubmit(perJob)
	}
	return ev
}

// serialSubmit is the master's own seconds per job, paid one job after
// another, of jobs that wait perJob each: Submit, or, as in the cluster
// model, the whole dispatch where its own part was not measured.
func (c *Cluster) serialSubmit(perJob float64) float64 {
	if c.Submit.V > 0 {
		return c.Submit.V
	}
	return perJob
}

// allPairsRounds predicts a distributed All-Pairs run job by job, in jobs
// as the master cuts them (model.AllPairsJobs), which end in rounds, on
// all of the cluster's slots (a run submits every job; the batch system
// or the master runs as many at once as it has slots), here too when
// local > 0 (hybrid), and returns the fastest job size among those of one
// job for each of 1…slots+local slots, and extra (if not 0), and on how
// many slots its jobs run at once. ok is false where there are too many
// to follow so: the flowing model (model.ChooseAllPairs) stands.
func allPairsRounds(in model.AllPairsInputs, c *Cluster, start float64, slots, local, extra int) (seconds float64, cells, hosts int, ok bool) {
	if slots > maxRoundsSlots {
		return 0, 0, 0, false
	}
	total := float64(in.N) * float64(in.M)
	seconds = math.Inf(1)
	try := func(jc float64) bool {
		if in.CellTime > 0 {
			jc = math.Min(jc, math.Floor(in.MaxJobTime/in.CellTime))
		}
		jc = math.Max(jc, 1)
		js := model.AllPairsJobs(in.N, in.M, jc)
		if len(js)*(slots+local) > maxEventWork {
			return false
		}
		ev := allPairsEventInputs(c, js, in.CellTime*float64(c.JobCores()), slots, start)
		if local > 0 {
			ev.LocalCores = local
			if c.HereWorkers.V > 0 {
				// The own worker stops once a worker joins from here.
				ev.LocalStops, ev.LocalUntil = true, c.HereJoin
			}
		}
		h := min(len(js), slots)
		if t := model.AllPairsEvents(ev) + model.AllPairsDataTime(in, int(jc), h); t < seconds {
			seconds, cells, hosts = t, int(jc), h
		}
		return true
	}
	for h := 1; h <= slots+local; h++ {
		if !try(math.Floor(total / float64(h))) {
			return 0, 0, 0, false
		}
	}
	if extra > 0 && !try(float64(extra)) {
		return 0, 0, 0, false
	}
	return seconds, cells, hosts, !math.IsInf(seconds, 1)
}

// hereJobCost is what a job of a hybrid All-Pairs or Wavefront run costs
// on this machine's cores beyond its cells: nothing, since the master does
// the job in its own process with the function it has open (batch.Job.Do)
// — on a batch system, and on Work Queue, where the master's own worker
// does it so (batch/wq's Driver.InProcess) — not as a process that loads
// the function and reads the inputs again.
func (c *Cluster) hereJobCost() float64 { return 0 }

func (c *Cluster) inputs(now time.Time) []Input {
	if c == nil {
		return []Input{{"cluster", "none", "nothing named in RIGHTSIZE_CLUSTER or ~/.config/rightsize/cluster, none detected"}}
	}
	kind := c.Kind
	if c.Project != "" {
		kind += " project " + c.Project
	}
	dispatch := "dispatch"
	if c.Kind == "wq" {
		dispatch = "start-up" // paid once: startDispatch
	}
	ins := []Input{
		{"cluster", kind, c.Named},
		{"hosts", fmt.Sprintf("%.0f", c.Hosts.V), c.Hosts.Describe(now)},
		{"cores per host", fmt.Sprintf("%.0f", c.CoresPerHost.V), c.CoresPerHost.Describe(now)},
		{dispatch, Seconds(c.Dispatch.V), c.Dispatch.Describe(now)},
		{"job cost", Seconds(c.JobCost.V), c.JobCost.Describe(now)},
		{"bandwidth", fmt.Sprintf("%.0f MB/s", c.Bandwidth.V/1e6), c.Bandwidth.Describe(now)},
	}
	if !c.HereWorkers.Assumed() {
		ins = append(ins, Input{"workers here", fmt.Sprintf("%.0f, the first after %s", c.HereWorkers.V, Seconds(c.HereJoin)), c.HereWorkers.Describe(now)})
	}
	return ins
}

// AllPairsWork is an All-Pairs problem as the decision sees it.
type AllPairsWork struct {
	N, M      int   // items of A and B
	Cells     int64 // cells to compute (fewer when symmetric or resumed)
	CellTime  Value // seconds per cell on one core
	ItemBytes float64
}

// maxJobSeconds bounds a job's predicted running time, as the
// distributed master does: the longer a job, the more a straggler or a
// lost worker costs.
const maxJobSeconds = 3600

// A hybrid run's slots, here and on the cluster, run at different speeds
// and join at different times (and a worker may turn out to share this
// machine's cores), so its jobs are smaller than the cluster alone would
// need: hybridJobsPerSlot jobs for each slot while a job's dispatch costs
// less than hybridDispatchShare of it.
const (
	hybridJobsPerSlot   = 3
	hybridDispatchShare = 0.05
)

// maxHybridWork bounds the blocks times the slots of a hybrid Wavefront
// whose graph the decision schedules block by block (block sizes 10%
// apart): a few milliseconds each.
const maxHybridWork = 1 << 18

// maxHybridCells bounds the cells of a hybrid Wavefront that the decision
// simulates cell by cell (model.WavefrontHybrid, block sizes 10% apart): a
// 64×64 region takes about 40 ms (400 ns a cell and block size). A larger
// region is predicted by its blocks (hybridBlocks), as if this machine's
// cores took blocks too.
const maxHybridCells = 1 << 12

// DecideAllPairs predicts the problem on this machine, on the cluster and
// on both, and picks the fastest, corrected by cs.
func DecideAllPairs(w AllPairsWork, m Machine, c *Cluster, cs map[string]Correction, now time.Time) Decision {
	local := max(int(m.Cores.V), 1)
	t := w.CellTime.V
	work := float64(w.Cells) * t
	d := Decision{Cluster: c}
	d.Inputs = append([]Input{
		{"problem", fmt.Sprintf("%d × %d items, %d cells to compute", w.N, w.M, w.Cells), "counted"},
		{"cell time", Seconds(t), w.CellTime.Describe(now)},
		{"item size", fmt.Sprintf("%.0f bytes", w.ItemBytes), "the sets' mean"},
		{"this machine", fmt.Sprintf("%d cores", local), m.Cores.Describe(now)},
	}, c.inputs(now)...)
	mc := apply(cs, Multicore, "", work/float64(local))
	mc.Detail = fmt.Sprintf("%d cores", local)
	d.Predictions = []Prediction{mc}
	if c == nil {
		d.Predictions = append(d.Predictions, Prediction{Mode: Distributed, Seconds: math.Inf(1)}, Prediction{Mode: Hybrid, Seconds: math.Inf(1)})
		d.choose()
		return d
	}
	// The model's matrix has the problem's cells: a resumed or symmetric
	// problem is a square of the same area.
	side := int(math.Sqrt(float64(w.Cells)))
	// Jobs of k cores run their cells k at a time, on slots/k hosts.
	k := c.JobCores()
	jobs := c.Slots() / k
	in := model.AllPairsInputs{
		N: max(side, 1), M: max(int(w.Cells)/max(side, 1), 1),
		CellTime:   t / float64(k),
		ItemBytes:  w.ItemBytes,
		Bandwidth:  c.Bandwidth.V,
		Dispatch:   c.perJob(),
		Submit:     c.Submit.V,
		MaxHosts:   max(jobs, 1),
		MaxJobTime: maxJobSeconds,
		LocalCores: local,
		Star:       true, // what our masters do: they send, or a file server serves
	}
	// On Work Queue the dispatch is the workers' joining, once
	// (startDispatch): the model's per-job and serial dispatch are
	// then nothing.
	start, perJob := c.startDispatch()
	if c.Kind == "wq" {
		in.Dispatch, in.Submit = c.JobCost.V, -1
	}
	dist := Prediction{Mode: Distributed, Seconds: math.Inf(1)}
	var ch model.AllPairsChoice
	if jobs > 0 && w.Cells > 0 {
		ch = model.ChooseAllPairs(in)
		ch.Cluster += start
		if rt, cells, hosts, ok := allPairsRounds(in, c, start, jobs, 0, 0); ok {
			ch.Cluster, ch.JobCells, ch.Hosts = rt, cells, hosts
		}
		dist = apply(cs, Distributed, c.Kind, ch.Cluster)
		dist.Detail = fmt.Sprintf("jobs of %d cells on %d of %d slots", ch.JobCells, ch.Hosts, jobs)
		if k > 1 {
			dist.Detail = fmt.Sprintf("jobs of %d cells, %d cores each, on %d of %d hosts", ch.JobCells, k, ch.Hosts, jobs)
		}
	}
	// Hybrid: this machine's cores take jobs from the start, the
	// cluster's slots after its dispatch, on jobs as the distributed
	// model sized them or smaller (hybridJobCells). It is never slower
	// than distributed: this machine's cores only take jobs the
	// cluster's would have waited for. It may be slower than multicore,
	// since every cell then runs in a job.
	hy := apply(cs, Hybrid, c.Kind, work/float64(local))
	if ch.JobCells > 0 {
		hj := hybridJobCells(w.Cells, ch.JobCells, ch.Hosts*k+local, t/float64(k), perJob+c.JobCost.V)
		var both float64
		var how string
		if c.HereWorkers.V > 0 {
			how = fmt.Sprintf(", which stop taking jobs after %s (%.0f of the cluster's workers run here)", Seconds(c.HereJoin), c.HereWorkers.V)
		}
		slots := ch.Hosts
		if rt, cells, _, ok := allPairsRounds(in, c, start, jobs, local, hj); ok {
			// Jobs end in rounds: predicted event by event, on all the
			// cluster's slots and this machine's cores, in the fastest
			// job size.
			both, hj, slots = rt, cells, jobs
		} else {
			// Too many jobs to follow one by one: the work flows evenly
			// over the slots. The cluster's slots join after its start
			// and the serial part of a dispatch for h hosts (h·Submit in
			// all, so on average half of it); each spends a dispatch per
			// job.
			job := float64(hj) * t / float64(k)
			join := start + perJob + c.serialSubmit(perJob)*float64(ch.Hosts)/2
			eff := job / (job + perJob + c.JobCost.V)
			here := float64(local) * job / (job + c.hereJobCost())
			if c.HereWorkers.V > 0 {
				// The own worker stops once a worker joins from here:
				// its cores do what they can until then.
				here = 0
			}
			both = hybridTime(work, here, float64(ch.Hosts*k)*eff, join) + model.AllPairsDataTime(in, hj, ch.Hosts)
		}
		hy = apply(cs, Hybrid, c.Kind, math.Min(both, ch.Cluster))
		joined := Seconds(start + perJob)
		if perJob > 0 && slots > 1 {
			if last := Seconds(start + perJob + c.serialSubmit(perJob)*float64(slots-1)); last != joined {
				joined += " to " + last
			}
		}
		hy.Detail = fmt.Sprintf("jobs of %d cells; %d cores here from the start%s, %d slots after %s", hj, local, how, slots*k, joined)
		d.jobCells[Hybrid] = hj
	}
	d.Predictions = append(d.Predictions, dist, hy)
	d.jobCells[Distributed] = ch.JobCells
	d.choose()
	d.setSize()
	return d
}

// hybridJobCells sizes a hybrid run's jobs: the cluster's size (cells),
// or smaller, down to hybridJobsPerSlot jobs for each of slots, as long as
// a job of cells taking cellTime each still runs at least 1 /
// hybridDispatchShare times its dispatch.
func hybridJobCells(total int64, cells, slots int, cellTime, dispatch float64) int {
	even := int(total / int64(hybridJobsPerSlot*max(slots, 1)))
	least := int(math.Ceil(dispatch / hybridDispatchShare / math.Max(cellTime, 1e-12)))
	return max(min(cells, max(even, least)), 1)
}

// WavefrontWork is a Wavefront problem as the decision sees it.
type WavefrontWork struct {
	N        int   // cells on a side (the larger side of the region)
	CellTime Value // seconds per cell on one core
}

// DecideWavefront predicts an n×n Wavefront on this machine, on the
// cluster (in the best square blocks) and on both, and picks the fastest.
func DecideWavefront(w WavefrontWork, m Machine, c *Cluster, cs map[string]Correction, now time.Time) Decision {
	local := max(int(m.Cores.V), 1)
	tau := w.CellTime.V
	d := Decision{Cluster: c}
	d.Inputs = append([]Input{
		{"problem", fmt.Sprintf("%d × %d cells", w.N, w.N), "counted"},
		{"cell time", Seconds(tau), w.CellTime.Describe(now)},
		{"this machine", fmt.Sprintf("%d cores", local), m.Cores.Describe(now)},
	}, c.inputs(now)...)
	mc := apply(cs, Multicore, "", model.WavefrontMulticore(w.N, w.N, local, tau))
	mc.Detail = fmt.Sprintf("%d cores", local)
	d.Predictions = []Prediction{mc}
	if c == nil || c.Slots() == 0 {
		d.Predictions = append(d.Predictions, Prediction{Mode: Distributed, Seconds: math.Inf(1)}, Prediction{Mode: Hybrid, Seconds: math.Inf(1)})
		d.choose()
		return d
	}
	k := c.JobCores()
	slots := c.Slots() / k
	limit := max(int(math.Sqrt(maxJobSeconds/math.Max(tau, 1e-9))), 1)
	start, perJob := c.startDispatch()
	dt, db := bestWavefrontBlock(w.N, limit, slots, k, tau, perJob+c.JobCost.V)
	dist := apply(cs, Distributed, c.Kind, start+dt)
	dist.Detail = fmt.Sprintf("blocks of %d×%d on %d slots", db, db, slots)
	ht, hb, hdetail := HybridWavefront(w.N, local, tau, c)
	hy := apply(cs, Hybrid, c.Kind, ht)
	hy.Detail = hdetail
	d.Predictions = append(d.Predictions, dist, hy)
	d.blocks[Distributed], d.blocks[Hybrid] = db, hb
	d.choose()
	d.setSize()
	return d
}

// HybridWavefront predicts a hybrid n×n Wavefront of cells of tau
// seconds on local cores here and cluster c, as DecideWavefront does, and
// returns the block side to run it in and the plan in words. It serves a
// run that is hybrid without a decision (the distributed master's, when
// placement did not size its blocks) as well as the decision.
func HybridWavefront(n, local int, tau float64, c *Cluster) (seconds float64, block int, detail string) {
	k := c.JobCores()
	slots := c.Slots() / k
	limit := max(int(math.Sqrt(maxJobSeconds/math.Max(tau, 1e-9))), 1)
	if n >= 1 && n*n <= maxHybridCells {
		return hybridCells(n, local, slots, k, limit, tau, c)
	}
	return hybridBlocks(n, local, slots, k, limit, tau, c)
}

// bestWavefrontBlock returns the fastest distributed Wavefront of n×n
// cells predicted on nodes of cpn cores with a job cost of delta, in
// square blocks of at most limit cells on a side, and that side, each
// block released as soon as its inputs are done
// (model.BestWavefrontDistributed).
func bestWavefrontBlock(n, limit, nodes, cpn int, tau, delta float64) (float64, int) {
	return model.BestWavefrontDistributed(n, limit, nodes, cpn, tau, delta)
}

// hybridCells predicts a hybrid Wavefront, and the block side: this
// machine's cores take cells as the multicore engine does, the cluster
// (a batch system's slots, or Work Queue's workers) the blocks that
// become ready while they are busy (blocks.Hybrid, which the master runs
// and model.WavefrontHybrid simulates, each block side in turn:
// model.BestWavefrontHybrid).
func hybridCells(n, local, slots, k, limit int, tau float64, c *Cluster) (seconds float64, block int, detail string) {
	start, perJob := c.startDispatch()
	best, b := model.BestWavefrontHybrid(model.WavefrontHybridInputs{
		W: n, H: n, LocalCores: local, Slots: slots, JobCores: k,
		CellTime: tau, Dispatch: perJob, JobCost: c.JobCost.V, Start: start,
	}, limit)
	detail = fmt.Sprintf("cells on %d cores here, %d blocks of %d×%d to %d slots (%d taken back from the queue)",
		local, best.Sent-best.TakenBack, b, b, slots, best.TakenBack)
	return best.Seconds, b, detail
}

// hybridBlocks predicts a hybrid Wavefront too large to simulate cell by
// cell, and the block side, as if its blocks ran on this machine's cores
// as on the cluster's slots: this machine's cores are as many
// more slots, and they are free first: the blocks the wavefront releases
// one at a time (its start, its end, its critical path) run here without
// the cluster's dispatch, and a core here takes a block still in the
// cluster's dispatch. The blocks' graph list-scheduled on both
// (model.Makespan, as batch.Hybrid and the master's own worker run it)
// predicts that, for the block sizes whose graph is small enough to
// schedule block by block; the bounds are the cluster widened by this
// machine (every block charged a dispatch: on the safe side) and this
// machine's cores alone.
func hybridBlocks(n, local, slots, k, limit int, tau float64, c *Cluster) (seconds float64, block int, detail string) {
	here := max(local/k, 1)
	// Work Queue's workers join once, after start (startDispatch):
	// the blocks' schedules are charged it whole, on the safe side.
	start, perJob := c.startDispatch()
	ht, hb := bestWavefrontBlock(n, limit, slots+here, k, tau, perJob+c.JobCost.V)
	ht += start
	if lt, lb := bestWavefrontBlock(n, limit, local, 1, tau, c.hereJobCost()); lt < ht {
		ht, hb = lt, lb
	}
	p := model.FlowPlaces{LocalSlots: here, RemoteSlots: slots, Dispatch: perJob + c.JobCost.V, Hybrid: true}
	for b := 1; b <= min(n, limit); b = max(b+1, b*11/10) {
		if nb := float64((n + b - 1) / b); nb*nb*float64(slots+here) > maxHybridWork {
			continue
		}
		if t := start + model.Makespan(model.WavefrontBlocks(n, b, k, tau), p); t < ht {
			ht, hb = t, b
		}
	}
	return ht, hb, fmt.Sprintf("blocks of %d×%d on %d slots and %d cores here", hb, hb, slots, local)
}

// FlowWork is a workflow as the decision sees it.
type FlowWork struct {
	// Rules are its rules, parents first, with their predicted seconds;
	// Here marks those that run on this machine whatever the placement.
	Rules []model.FlowRule
	// Estimates says where the rules' times came from, in words.
	Estimates string
	// SendAll sends every rule not marked Here to the cluster in the
	// cluster modes, as makeflow -T does without --auto-local: none is
	// kept here for being shorter than its dispatch.
	SendAll bool
}

// DecideFlow predicts a workflow's makespan on this machine, on the
// cluster — where each rule predicted to run for less than its dispatch
// and transfer would cost stays here — and hybrid (this machine's cores
// take the cluster's rules when free: a batch.Hybrid on a batch system, a
// worker in the master's process on Work Queue), and picks the fastest,
// corrected by cs.
func DecideFlow(w FlowWork, m Machine, c *Cluster, cs map[string]Correction, now time.Time) Decision {
	local := max(int(m.Cores.V), 1)
	critical, _ := model.CriticalPath(w.Rules)
	d := Decision{Cluster: c}
	d.Inputs = append([]Input{
		{"workflow", fmt.Sprintf("%d rules, %s of work, critical path %s", len(w.Rules), Seconds(model.TotalWork(w.Rules)), Seconds(critical)), "counted"},
		{"rule times", w.Estimates, "earlier runs, kept in ~/.cache/rightsize/makeflow-rules.costs"},
		{"this machine", fmt.Sprintf("%d cores", local), m.Cores.Describe(now)},
	}, c.inputs(now)...)
	mc := apply(cs, Multicore, "", model.Makespan(w.Rules, model.FlowPlaces{LocalSlots: local}))
	mc.Detail = fmt.Sprintf("%d cores", local)
	dist := Prediction{Mode: Distributed, Seconds: math.Inf(1)}
	hy := Prediction{Mode: Hybrid, Seconds: math.Inf(1)}
	var keep [3][]bool
	if c != nil && c.Slots() > 0 {
		places := model.FlowPlaces{LocalSlots: local, RemoteSlots: c.Slots(), Dispatch: c.perJob(), Bandwidth: c.Bandwidth.V}
		// Two ways to place the rules: the short ones kept here (unless
		// SendAll), or every one sent; each mode takes the faster.
		short := make([]bool, len(w.Rules))
		kept := 0
		for i, r := range w.Rules {
			if !w.SendAll && !r.Here && r.Seconds < c.perJob()+r.Bytes/c.Bandwidth.V {
				short[i] = true
				kept++
			}
		}
		best := func(p model.FlowPlaces) (float64, []bool, int) {
			t := model.Makespan(w.Rules, p)
			if kept == 0 {
				return t, make([]bool, len(w.Rules)), 0
			}
			rules := append([]model.FlowRule(nil), w.Rules...)
			for i, k := range short {
				rules[i].Here = rules[i].Here || k
			}
			if tk := model.Makespan(rules, p); tk <= t {
				return tk, short, kept
			}
			return t, make([]bool, len(w.Rules)), 0
		}
		t, k, n := best(places)
		dist = apply(cs, Distributed, c.Kind, t)
		dist.Detail = fmt.Sprintf("%d slots; rules kept here, shorter than their dispatch: %d", c.Slots(), n)
		keep[Distributed] = k
		places.Hybrid = true
		t, k, n = best(places)
		hy = apply(cs, Hybrid, c.Kind, t)
		hy.Detail = fmt.Sprintf("%d slots and %d cores here; rules kept here, shorter than their dispatch: %d", c.Slots(), local, n)
		keep[Hybrid] = k
	}
	d.Predictions = []Prediction{mc, dist, hy}
	d.keepHere = keep
	d.choose()
	d.setSize()
	return d
}

// Summary is the line printed after a run: the prediction for the mode it
// ran in against what it took.
func Summary(predicted, measured float64) string {
	if !(predicted > 0) || math.IsInf(predicted, 0) {
		return fmt.Sprintf("took %s", Seconds(measured))
	}
	off := 100 * (measured - predicted) / predicted
	return fmt.Sprintf("predicted %s, took %s (%+.0f%%)", Seconds(predicted), Seconds(measured), off)
}

// Key returns a history key from the parts that identify a work (the
// function's identity and arguments, a workflow's path): a digest, so that
// the history neither grows with long arguments nor shows them.
func Key(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:12])
}
