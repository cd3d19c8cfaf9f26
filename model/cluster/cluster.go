// Package cluster finds the cluster a user has and measures it, for
// automatic placement (package model/place): which batch system, how many
// hosts and cores it has free now, how long a job waits before it starts,
// and how fast data reaches it. Every figure says where it came from —
// the user's own setting, a batch system's listing (sinfo, qstat -g c,
// condor_status, a Work Queue catalog), a probe job, a measurement kept
// from an earlier run — and how old it is; what could not be measured is
// a documented default, marked as assumed.
//
// A cluster is named, in this order, by -T (the Options' Kind), by the
// environment variable RIGHTSIZE_CLUSTER, or by the file
// ~/.config/rightsize/cluster; otherwise it is detected: SLURM when sinfo
// lists a node, Grid Engine when qstat -g c lists a queue, HTCondor when
// condor_status lists a slot, a Work Queue project (given on the command
// line) when the catalog lists its masters. The setting is a batch type
// followed by key=value pairs ("slurm cores=4", "wq project=blast
// hosts=8"; see ParseSpec); the file holds one "key = value" per line,
// with the batch type as "kind". The batch type none, in either, names no
// cluster and detects none.
//
// The dispatch latency is measured by a probe job (a job running true)
// submitted through package batch, at most once an hour per batch type,
// and only when the caller allows it (Options.Probe); on SLURM, a longer
// wait that sbatch --test-only predicts for the queue as it is now wins,
// except that a start a year off — SLURM's plan when jobs without a time
// limit hold the cores — is no prediction and counts as a probe's longest
// wait, two minutes.
// On Work Queue the dispatch is the workers' start-up, paid once per run:
// the time from a master's start to its workers' joining, which each run
// measures (SaveStartup, with the workers that joined from this machine).
// Probes, and the figures runs measure (SaveDispatch, SaveStartup,
// SaveBandwidth, SaveJobCost), are kept in ~/.cache/rightsize/cluster.json,
// per batch type. The job cost, what a job costs beyond its work, is kept
// per tool too, as the median of that tool's latest eight runs; a tool
// with no figure of its own borrows the latest another tool measured on
// that batch type, and says so.
package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

// Options say what Find may use. The zero value looks everywhere, with
// the user's environment, files and batch systems, and probes nothing.
type Options struct {
	// Kind is a batch type forced by -T (wq, slurm, sge, condor, local),
	// or "" to look for one.
	Kind string
	// Project and Port are a Work Queue project name and port from the
	// command line, if any.
	Project string
	Port    int
	// Env looks up environment variables; nil means os.Getenv.
	Env func(string) string
	// ConfigDir holds the file "cluster"; "" means the user's
	// configuration directory's rightsize/.
	ConfigDir string
	// CacheDir holds cluster.json, the measurements kept between runs;
	// "" means the user's cache directory's rightsize/.
	CacheDir string
	// Now returns the time; nil means time.Now.
	Now func() time.Time
	// Probe lets Find submit a probe job to measure the dispatch latency
	// when the cache has no fresh figure.
	Probe bool
	// Catalogs are the catalog servers asked about Work Queue projects;
	// nil means the one the user's setting names (catalog=host:port),
	// else those of $CATALOG_HOST and $CATALOG_PORT, or localhost's.
	Catalogs []string
	// Bin is where the batch system's commands are; "" means $PATH.
	Bin string
	// Tool names the program placing or measuring a run (allpairs,
	// wavefront, makeflow): each keeps a job cost of its own, since its
	// jobs do different work beyond their cells (see SaveJobCost).
	Tool string
}

func (o Options) getenv(name string) string {
	if o.Env != nil {
		return o.Env(name)
	}
	return os.Getenv(name)
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) configDir() string {
	if o.ConfigDir != "" {
		return o.ConfigDir
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rightsize")
}

func (o Options) cacheDir() string {
	if o.CacheDir != "" {
		return o.CacheDir
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rightsize")
}

// EnvVar is the environment variable that names the cluster.
const EnvVar = "RIGHTSIZE_CLUSTER"

// A Spec is a cluster as a user names it: a batch type and its settings.
type Spec struct {
	Kind     string
	Project  string
	Port     int
	Catalog  string  // host:port of the catalog, for wq
	Hosts    int     // hosts, when nothing can count them; 0: count
	Cores    int     // cores per host; 0: count
	Dispatch float64 // dispatch seconds the user gives; 0: measure
	Delay    float64 // local only: each job waits this long (an emulated cluster)
}

// kinds are the batch types a spec may name.
var kinds = []string{"wq", "slurm", "sge", "condor", "local"}

// ParseSpec parses a RIGHTSIZE_CLUSTER setting: a batch type (wq, slurm,
// sge, condor, local), then key=value pairs, each setting the Spec field
// of its name: project, port, catalog (host:port) for wq; hosts and cores
// per host, for when nothing can count them or the user knows better;
// dispatch, the user's own figure of the dispatch latency in seconds; and
// for local only, delay. "none" returns a nil Spec and no error.
func ParseSpec(s string) (*Spec, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, errors.New("empty: want a batch type (wq, slurm, sge, condor, local) or none")
	}
	sp := &Spec{}
	if err := sp.set("kind", fields[0]); err != nil {
		return nil, err
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value", f)
		}
		if err := sp.set(k, v); err != nil {
			return nil, err
		}
	}
	if err := sp.check(); err != nil {
		return nil, err
	}
	if sp.Kind == "none" {
		return nil, nil
	}
	return sp, nil
}

// ReadSpecFile reads a cluster file: "key = value" lines with the same
// keys as a RIGHTSIZE_CLUSTER setting, the batch type as "kind", blank
// lines and # comments. A missing file returns ErrNotExist (wrapped);
// "kind = none" returns a nil Spec and no error.
func ReadSpecFile(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	sp := &Spec{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: %q: want key = value", path, line, text)
		}
		if err := sp.set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	if sp.Kind == "" {
		return nil, fmt.Errorf("%s: no kind = line (wq, slurm, sge, condor, local or none)", path)
	}
	if err := sp.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if sp.Kind == "none" {
		return nil, nil
	}
	return sp, nil
}

func (sp *Spec) set(key, value string) error {
	num := func() (float64, error) {
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("%s=%s: want a number, at least 0", key, value)
		}
		return f, nil
	}
	var f float64
	var err error
	switch key {
	case "kind":
		if value != "none" && !slices.Contains(kinds, value) {
			return fmt.Errorf("unknown batch type %q (known: %s, or none)", value, strings.Join(kinds, ", "))
		}
		sp.Kind = value
	case "project":
		sp.Project = value
	case "catalog":
		sp.Catalog = value
	case "port", "hosts", "cores":
		if f, err = num(); err != nil {
			return err
		}
		if f != float64(int(f)) {
			return fmt.Errorf("%s=%s: want a whole number", key, value)
		}
		switch key {
		case "port":
			sp.Port = int(f)
		case "hosts":
			sp.Hosts = int(f)
		default:
			sp.Cores = int(f)
		}
	case "dispatch":
		sp.Dispatch, err = num()
	case "delay":
		sp.Delay, err = num()
	default:
		return fmt.Errorf("unknown setting %q (known: project, port, catalog, hosts, cores, dispatch, delay)", key)
	}
	return err
}

func (sp *Spec) check() error {
	switch {
	case sp.Kind == "none" && *sp != Spec{Kind: "none"}:
		return errors.New("none takes no settings")
	case sp.Port > 65535:
		return fmt.Errorf("port=%d: not a port", sp.Port)
	case sp.Delay > 0 && sp.Kind != "local":
		return fmt.Errorf("delay applies to kind local only (a local cluster standing for a real one)")
	}
	return nil
}

// ByFlag is the Cluster.Named of a cluster that -T names with no settings
// of the user's (no RIGHTSIZE_CLUSTER or cluster file of that kind).
const ByFlag = "-T"

// named returns the cluster the user named, and how: by o.Kind, the
// environment, or the file. A named cluster whose kind is o.Kind lends it
// its settings. A nil spec with found true means "none".
func named(o Options) (sp *Spec, how string, found bool, err error) {
	if o.Kind != "" && !slices.Contains(kinds, o.Kind) {
		return nil, "", false, fmt.Errorf("unknown batch type %q (known: %s)", o.Kind, strings.Join(kinds, ", "))
	}
	var env, file *Spec
	envHow, fileHow := EnvVar, ""
	if v := strings.TrimSpace(o.getenv(EnvVar)); v != "" {
		if env, err = ParseSpec(v); err != nil {
			return nil, "", false, fmt.Errorf("%s: %w", EnvVar, err)
		}
		if env == nil && o.Kind == "" {
			return nil, EnvVar, true, nil
		}
	} else if dir := o.configDir(); dir != "" {
		path := filepath.Join(dir, "cluster")
		file, err = ReadSpecFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = nil // no file: nothing named there
		case err != nil:
			return nil, "", false, err
		case file == nil && o.Kind == "":
			return nil, path, true, nil // kind = none
		}
		fileHow = path
	}
	switch {
	case o.Kind != "":
		for _, s := range []struct {
			sp  *Spec
			how string
		}{{env, envHow}, {file, fileHow}} {
			if s.sp != nil && s.sp.Kind == o.Kind {
				return s.sp, "-T, with the settings of " + s.how, true, nil
			}
		}
		return &Spec{Kind: o.Kind}, ByFlag, true, nil
	case env != nil:
		return env, envHow, true, nil
	case file != nil:
		return file, fileHow, true, nil
	}
	return nil, "", false, nil
}

// Find returns the cluster the user has, measured, or nil (and no error)
// if there is none. It fails when the user's setting is wrong, and when a
// probe job on a batch system forced by o.Kind fails (the run would fail
// there too); a probe that fails on a cluster only named or detected
// leaves the dispatch latency as it was (cached or assumed), since this
// machine may still do the work.
func Find(ctx context.Context, o Options) (*place.Cluster, error) {
	sp, how, found, err := named(o)
	if err != nil {
		return nil, err
	}
	if !found {
		sp, how = detect(ctx, o)
	}
	if sp == nil {
		return nil, nil
	}
	if o.Project != "" {
		sp.Project = o.Project
	}
	if o.Port != 0 {
		sp.Port = o.Port
	}
	c := &place.Cluster{Kind: sp.Kind, Named: how, Project: sp.Project, Port: sp.Port, Delay: sp.Delay}
	measureWidth(ctx, o, sp, how, c)
	if err := measureDispatch(ctx, o, sp, how, c); err != nil {
		return nil, err
	}
	m := readCache(o)[sp.Kind]
	c.Bandwidth = place.Value{V: place.DefaultBandwidth}
	if m.Bandwidth > 0 {
		c.Bandwidth = place.Value{V: m.Bandwidth, Source: "measured in a run", Measured: m.BandwidthAt}
	}
	c.JobCost = m.jobCost(o.Tool)
	return c, nil
}

// commandTimeout bounds each listing command of a batch system and each
// catalog query: one that does not answer by then is taken as absent, so
// that looking for a cluster never holds a run up for long.
const commandTimeout = 5 * time.Second

// detect looks for a batch system that answers with at least one host,
// then for the Work Queue project's masters in the catalog.
func detect(ctx context.Context, o Options) (*Spec, string) {
	for _, k := range []struct{ kind, cmd string }{{"slurm", "sinfo"}, {"sge", "qstat"}, {"condor", "condor_status"}} {
		// LookPath first: with nothing installed, detection costs no
		// process at all.
		if _, err := lookPath(o.Bin, k.cmd); err != nil {
			continue
		}
		if w, err := listWidth(ctx, o.Bin, k.kind); err == nil && w.Hosts > 0 {
			return &Spec{Kind: k.kind}, "detected: " + k.cmd + " answers"
		}
	}
	if o.Project != "" {
		if _, err := catalogWidth(ctx, catalogs(o, nil), o.Project); err == nil {
			return &Spec{Kind: "wq", Project: o.Project}, "detected: the catalog lists project " + o.Project
		}
	}
	return nil, ""
}

// catalogs returns the catalog servers to ask: the caller's, else the
// one the user's setting names, else $CATALOG_HOST's or localhost's.
func catalogs(o Options, sp *Spec) []string {
	switch {
	case o.Catalogs != nil:
		return o.Catalogs
	case sp != nil && sp.Catalog != "":
		return []string{sp.Catalog}
	}
	return catalog.DefaultAddrs()
}

// measureWidth fills c's hosts and cores per host: the user's figures,
// else the batch system's listing, else assumed.
func measureWidth(ctx context.Context, o Options, sp *Spec, how string, c *place.Cluster) {
	var w span
	var src string
	switch sp.Kind {
	case "local":
		w, src = span{Hosts: runtime.NumCPU(), Cores: 1}, "this machine's CPUs, a slot each"
	case "wq":
		if sp.Project != "" {
			if cw, err := catalogWidth(ctx, catalogs(o, sp), sp.Project); err == nil {
				w, src = cw.span, cw.Source
			}
		}
	default:
		if lw, err := listWidth(ctx, o.Bin, sp.Kind); err == nil {
			w, src = lw, listCommand[sp.Kind]
			if w.Busy {
				src += ": no free cores now; every responding host"
			}
		}
	}
	c.Hosts = place.Value{V: float64(w.Hosts), Source: src}
	c.CoresPerHost = place.Value{V: float64(max(w.Cores, 1)), Source: src}
	if w.Cores == 0 {
		// A listing that counts no cores (a project with no workers)
		// says nothing about them: one each is assumed.
		c.CoresPerHost.Source = ""
	}
	if sp.Hosts > 0 {
		c.Hosts = place.Value{V: float64(sp.Hosts), Source: how}
	}
	if sp.Cores > 0 {
		c.CoresPerHost = place.Value{V: float64(sp.Cores), Source: how}
	}
}
