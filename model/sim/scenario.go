package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/rightsize/rightsize/internal/jsonpos"
	"github.com/rightsize/rightsize/workqueue/factory"
)

// A Scenario is what is simulated: a master, the workers it gets (a fixed
// set, or those a factory provisions from a batch system) and the tasks it
// runs. Times are in seconds, sizes in MB, bandwidths in MB/s. It is read
// from JSON (Load); the zero value of a field means its documented default.
type Scenario struct {
	Name string `json:"name"`
	// Seed seeds every random draw: the same scenario and seed give the
	// same run.
	Seed uint64 `json:"seed"`
	// Limit bounds the simulated time (default one week): a run still
	// going then ends, its tasks counted as not done.
	Limit float64 `json:"limit"`

	Master    Master        `json:"master"`
	Scheduler SchedulerConf `json:"scheduler"`
	Workers   []WorkerGroup `json:"workers"`
	Factory   *Factory      `json:"factory,omitempty"`
	Tasks     []TaskGroup   `json:"tasks"`
	Blocks    *Blocks       `json:"blocks,omitempty"`
	Masters   *Masters      `json:"masters,omitempty"`
}

// Master describes the master's machine.
type Master struct {
	// Bandwidth is the master's network interface, shared by every
	// transfer to and from workers (default 125: a gigabit link).
	Bandwidth float64 `json:"bandwidth"`
	// Latency is one way between the master and a worker (default 0.0002).
	Latency float64 `json:"latency"`
	// TaskCost is the master's own time per task (sending it, taking its
	// result): the master does one at a time (default 0.0005).
	TaskCost float64 `json:"task_cost"`
	// Tick is how often the scheduler checks stragglers, overdue tasks and
	// silent workers (default 0.2, the master's).
	Tick float64 `json:"tick"`
}

// SchedulerConf sets the scheduler's policies (workqueue/sched.Config);
// zero values mean the scheduler's defaults.
type SchedulerConf struct {
	// FastAbort is the fast-abort multiplier (0: off).
	FastAbort float64 `json:"fast_abort"`
	// Speculation is the multiplier of the mean past which a task gets a
	// copy on an idle worker (0: the default; negative: no copies).
	Speculation float64 `json:"speculation"`
	// SlowStart is how many tasks a new worker may hold (0: default 4;
	// negative: as its resources allow).
	SlowStart int `json:"slow_start"`
	// KeepaliveInterval and KeepaliveTimeout (0: defaults 120 and 30).
	KeepaliveInterval float64 `json:"keepalive_interval"`
	KeepaliveTimeout  float64 `json:"keepalive_timeout"`
}

// WorkerGroup is Count alike workers.
type WorkerGroup struct {
	Count    int     `json:"count"`
	Cores    float64 `json:"cores"` // default 1
	MemoryMB int64   `json:"memory_mb"`
	DiskMB   int64   `json:"disk_mb"`
	// Speed divides the tasks' run times (default 1).
	Speed float64 `json:"speed"`
	// Bandwidth is the worker's own link (default: the master's).
	Bandwidth float64 `json:"bandwidth"`
	// TaskCost is the worker's time to set up and reap a task (sandbox,
	// fork and exec), added to each run (default 0).
	TaskCost float64 `json:"task_cost"`
	// Arrive is when each worker connects (default 0).
	Arrive Dist `json:"arrive"`
	// Lifetime, if set, is how long each worker lives once connected: then
	// it dies (preempted, its node failed).
	Lifetime *Dist `json:"lifetime,omitempty"`
	// Silent is the share of deaths the master is not told of (a node
	// that vanishes, a cut network): only keepalive finds them.
	Silent float64 `json:"silent"`
}

// Factory provisions workers from a batch system as the factory does
// (workqueue/factory.Plan decides how many).
type Factory struct {
	// Min and Max bound the workers submitted (factory.Limits).
	Min int `json:"min"`
	Max int `json:"max"`
	// Worker is what each submitted worker is (its Count, Arrive and
	// Lifetime are not used).
	Worker WorkerGroup `json:"worker"`
	// QueueWait is how long a submitted worker waits in the batch queue,
	// unless LRM is set.
	QueueWait Dist `json:"queue_wait"`
	// LRM, if set, is a batch system with slots that the requests wait
	// for room in, instead of QueueWait.
	LRM *LRM `json:"lrm,omitempty"`
	// Strategy is how the factory turns the workers it lacks into batch
	// requests (factory.Strategy: one-at-a-time, the default, additive,
	// exponential, all-at-once, or optimal, which needs an LRM).
	Strategy string `json:"strategy"`
	// Interval is how often the factory looks at the master (default 5).
	Interval float64 `json:"interval"`
	// IdleTimeout is how long a worker stays without a task before it
	// exits (default 60, the worker's --timeout).
	IdleTimeout float64 `json:"idle_timeout"`
	// FailStart is the share of jobs the batch system fails to start.
	FailStart float64 `json:"fail_start"`
	// Decision is the factory's policy, D1 to D6 (factory.Policy; default
	// D3), with MaxChange (workers a minute) and DefaultCapacity (tasks):
	// the factory reads the capacity the real master advertises
	// (capacity_tasks), measured as the real master measures it.
	Decision        string  `json:"decision"`
	MaxChange       float64 `json:"max_change"`
	DefaultCapacity int     `json:"default_capacity"`
}

// request returns the worker of a batch request of k workers: one worker
// with k times the resources, as factory.Worker.Request makes it.
func (f *Factory) request(k int) *WorkerGroup {
	g := f.Worker
	if k > 1 {
		g.Cores *= float64(k)
		g.MemoryMB *= int64(k)
		g.DiskMB *= int64(k)
	}
	return &g
}

// TaskGroup is Count alike tasks.
type TaskGroup struct {
	Count    int     `json:"count"`
	Category string  `json:"category"`
	Cores    float64 `json:"cores"`
	MemoryMB int64   `json:"memory_mb"`
	DiskMB   int64   `json:"disk_mb"`
	// Runtime is each task's run time on a worker of speed 1.
	Runtime Dist `json:"runtime"`
	// InputMB is sent with each task; SharedInputMB is one input every
	// task of the group reads, cached on a worker after its first task.
	// Groups whose SharedInput names the same file share it: a worker that
	// holds it for one has it for all (default: each group its own).
	InputMB       float64 `json:"input_mb"`
	SharedInputMB float64 `json:"shared_input_mb"`
	SharedInput   string  `json:"shared_input"`
	OutputMB      float64 `json:"output_mb"`
	// Hang is the chance that an attempt never ends (a straggler only
	// fast abort or a copy can end).
	Hang float64 `json:"hang"`
	// Submit is when each task is submitted (default 0).
	Submit Dist `json:"submit"`
}

// Dist is a distribution of times in seconds: "const" (Mean), "uniform"
// (Min to Max), "normal" (Mean, SD; cut at Min), "exp" (Mean) or
// "lognormal" (Mean, SD). The zero value is the constant 0. In JSON, a
// plain number is a constant.
type Dist struct {
	Kind string  `json:"dist"`
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// UnmarshalJSON takes a number as a constant, or an object.
func (d *Dist) UnmarshalJSON(b []byte) error {
	var x float64
	if err := json.Unmarshal(b, &x); err == nil {
		*d = Dist{Kind: "const", Mean: x}
		return nil
	}
	type plain Dist
	return jsonpos.Decode(b, (*plain)(d))
}

func (d Dist) check() error {
	switch d.Kind {
	case "", "const", "exp":
		if d.Mean < 0 {
			return fmt.Errorf("a negative mean")
		}
	case "uniform":
		if d.Min < 0 || d.Max < d.Min {
			return fmt.Errorf("uniform from %g to %g", d.Min, d.Max)
		}
	case "normal", "lognormal":
		if d.Mean < 0 || d.SD < 0 || d.Kind == "lognormal" && d.Mean == 0 {
			return fmt.Errorf("%s with mean %g and sd %g", d.Kind, d.Mean, d.SD)
		}
	default:
		return fmt.Errorf("unknown distribution %q (const, uniform, normal, exp or lognormal)", d.Kind)
	}
	return nil
}

// sampler draws from a Dist.
type sampler func() float64

func (d Dist) sampler(src rand.Source) sampler {
	switch d.Kind {
	case "uniform":
		u := distuv.Uniform{Min: d.Min, Max: d.Max, Src: src}
		return u.Rand
	case "normal":
		n := distuv.Normal{Mu: d.Mean, Sigma: d.SD, Src: src}
		return func() float64 { return math.Max(n.Rand(), d.Min) }
	case "exp":
		if d.Mean == 0 {
			return func() float64 { return 0 }
		}
		e := distuv.Exponential{Rate: 1 / d.Mean, Src: src}
		return e.Rand
	case "lognormal":
		// The underlying normal's parameters from the mean and sd wanted.
		s2 := math.Log1p(d.SD * d.SD / (d.Mean * d.Mean))
		l := distuv.LogNormal{Mu: math.Log(d.Mean) - s2/2, Sigma: math.Sqrt(s2), Src: src}
		return l.Rand
	}
	return func() float64 { return d.Mean }
}

// Load reads a scenario from a JSON file; an error names the file and the
// line.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s%w", path, err)
	}
	return sc, nil
}

// Parse reads a scenario from JSON. Errors begin with ":LINE: " where the
// line is known.
func Parse(b []byte) (*Scenario, error) {
	var sc Scenario
	if err := jsonpos.Decode(b, &sc); err != nil {
		// In the scenario's words, at the value at fault.
		err = jsonpos.Explain(err, b, &sc, nil, "a scenario")
		var ve *jsonpos.ValueError
		if errors.As(err, &ve) {
			off, _ := jsonpos.Locate(b, ve.Path)
			line, _ := jsonpos.LineCol(b, off)
			return nil, fmt.Errorf(":%d: %w", line, err)
		}
		if off, ok := jsonpos.Offset(err); ok {
			line, _ := jsonpos.LineCol(b, off)
			return nil, fmt.Errorf(":%d: %w", line, err)
		}
		return nil, fmt.Errorf(": %w", err)
	}
	if err := sc.check(); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	return &sc, nil
}

func (sc *Scenario) check() error {
	if len(sc.Tasks) == 0 && sc.Blocks == nil {
		return errors.New("no tasks and no blocks")
	}
	if sc.Blocks != nil {
		if err := sc.Blocks.check(); err != nil {
			return fmt.Errorf("blocks: %w", err)
		}
	}
	if ms := sc.Masters; ms != nil {
		if err := ms.check(); err != nil {
			return fmt.Errorf("masters: %w", err)
		}
		if ms.Count > 1 && (sc.Factory != nil || sc.Blocks != nil) {
			return errors.New("masters: several masters work with plain tasks and fixed workers only, not with a factory or blocks")
		}
	}
	if len(sc.Workers) == 0 && sc.Factory == nil {
		return errors.New("no workers and no factory")
	}
	for i, g := range sc.Workers {
		if err := g.check(); err != nil {
			return fmt.Errorf("workers[%d]: %w", i, err)
		}
		if g.Count <= 0 {
			return fmt.Errorf("workers[%d]: count %d", i, g.Count)
		}
	}
	if f := sc.Factory; f != nil {
		if err := f.Worker.check(); err != nil {
			return fmt.Errorf("factory.worker: %w", err)
		}
		if err := f.QueueWait.check(); err != nil {
			return fmt.Errorf("factory.queue_wait: %w", err)
		}
		if f.Max < 1 || f.Min < 0 || f.Min > f.Max {
			return fmt.Errorf("factory: min %d, max %d", f.Min, f.Max)
		}
		if f.FailStart < 0 || f.FailStart >= 1 {
			return fmt.Errorf("factory: fail_start %g is not in [0, 1)", f.FailStart)
		}
		if f.Decision != "" {
			if _, err := factory.ParsePolicy(f.Decision); err != nil {
				return fmt.Errorf("factory: %w", err)
			}
		}
		if f.Strategy != "" {
			s, err := factory.ParseStrategy(f.Strategy)
			if err != nil {
				return fmt.Errorf("factory: %w", err)
			}
			if s == factory.Optimal && f.LRM == nil {
				return errors.New("factory: strategy optimal needs an lrm, which says what it has free")
			}
		}
		if f.LRM != nil {
			if err := f.LRM.check(); err != nil {
				return fmt.Errorf("factory.lrm: %w", err)
			}
		}
		if f.MaxChange < 0 || f.DefaultCapacity < 0 {
			return errors.New("factory: a negative max_change or default_capacity")
		}
	}
	for i, g := range sc.Tasks {
		if g.Count <= 0 {
			return fmt.Errorf("tasks[%d]: count %d", i, g.Count)
		}
		for name, d := range map[string]Dist{"runtime": g.Runtime, "submit": g.Submit} {
			if err := d.check(); err != nil {
				return fmt.Errorf("tasks[%d].%s: %w", i, name, err)
			}
		}
		if g.Hang < 0 || g.Hang >= 1 {
			return fmt.Errorf("tasks[%d]: hang %g is not in [0, 1)", i, g.Hang)
		}
		if g.Cores < 0 || g.InputMB < 0 || g.SharedInputMB < 0 || g.OutputMB < 0 {
			return fmt.Errorf("tasks[%d]: a negative size", i)
		}
	}
	return nil
}

func (g WorkerGroup) check() error {
	if g.Cores < 0 || g.Speed < 0 || g.Bandwidth < 0 || g.TaskCost < 0 {
		return errors.New("a negative cores, speed, bandwidth or task cost")
	}
	if g.Silent < 0 || g.Silent > 1 {
		return fmt.Errorf("silent %g is not in [0, 1]", g.Silent)
	}
	if err := g.Arrive.check(); err != nil {
		return fmt.Errorf("arrive: %w", err)
	}
	if g.Lifetime != nil {
		if err := g.Lifetime.check(); err != nil {
			return fmt.Errorf("lifetime: %w", err)
		}
	}
	return nil
}

// withDefaults fills in the documented defaults.
func (sc Scenario) withDefaults() Scenario {
	if sc.Limit <= 0 {
		sc.Limit = 7 * 24 * 3600
	}
	m := &sc.Master
	if m.Bandwidth <= 0 {
		m.Bandwidth = 125
	}
	if m.Latency <= 0 {
		m.Latency = 0.0002
	}
	if m.TaskCost <= 0 {
		m.TaskCost = 0.0005
	}
	if m.Tick <= 0 {
		m.Tick = 0.2
	}
	if sc.Masters != nil {
		ms := sc.Masters.withDefaults()
		sc.Masters = &ms
	}
	sc.Workers = append([]WorkerGroup(nil), sc.Workers...)
	for i := range sc.Workers {
		sc.Workers[i] = sc.Workers[i].withDefaults(m.Bandwidth)
	}
	if f := sc.Factory; f != nil {
		g := *f
		g.Worker = g.Worker.withDefaults(m.Bandwidth)
		if g.Interval <= 0 {
			g.Interval = 5
		}
		if g.IdleTimeout <= 0 {
			g.IdleTimeout = 60
		}
		sc.Factory = &g
	}
	return sc
}

func (g WorkerGroup) withDefaults(bandwidth float64) WorkerGroup {
	if g.Cores == 0 {
		g.Cores = 1
	}
	if g.Speed == 0 {
		g.Speed = 1
	}
	if g.Bandwidth == 0 {
		g.Bandwidth = bandwidth
	}
	if g.MemoryMB == 0 {
		g.MemoryMB = int64(g.Cores * 4096)
	}
	if g.DiskMB == 0 {
		g.DiskMB = int64(g.Cores * 16384)
	}
	return g
}
