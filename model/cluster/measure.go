package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

// A span is what a listing says of a cluster's hosts now.
type span struct {
	// Hosts are the hosts (nodes, slots, workers) with free cores, or,
	// when Busy, every host that answers.
	Hosts int
	// Cores is the median of the free cores of those hosts (their cores
	// in use, when Busy); 0 when the listing does not say.
	Cores int
	// Busy says no host has a free core now: a job would queue, and
	// Hosts counts those it would queue for.
	Busy bool
}

// listCommand names the listing each batch system's width is read from.
var listCommand = map[string]string{
	"slurm":  "sinfo",
	"sge":    "qstat -g c",
	"condor": "condor_status",
}

func lookPath(bin, name string) (string, error) {
	if bin != "" {
		p := filepath.Join(bin, name)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	return exec.LookPath(name)
}

// output runs a batch system's command, with commandTimeout.
func output(ctx context.Context, bin, name string, args ...string) (string, error) {
	path, err := lookPath(bin, name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	// A child the command left holding its output must not keep us past
	// the timeout.
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// listWidth asks batch system kind for its hosts with free cores now and
// the cores each has free.
func listWidth(ctx context.Context, bin, kind string) (span, error) {
	var parse func(string) (span, error)
	var out string
	var err error
	switch kind {
	case "slurm":
		// -N: a line per node (and partition), whatever the nodes'
		// states, so that the nodes can be told apart.
		out, err = output(ctx, bin, "sinfo", "-h", "-N", "-o", "%N %C")
		parse = parseSinfo
	case "sge":
		out, err = output(ctx, bin, "qstat", "-g", "c")
		parse = parseQstatGC
	case "condor":
		out, err = output(ctx, bin, "condor_status", "-af", "Cpus", "State")
		parse = parseCondorStatus
	default:
		return span{}, fmt.Errorf("no listing for %s", kind)
	}
	if err != nil {
		return span{}, err
	}
	return parse(out)
}

// median returns the middle of xs (the lower one of an even count).
func median(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}

// spanOf makes the span of hosts with free cores free, falling back to
// the responding hosts with their cores in use when none is free.
func spanOf(free, busy []int) span {
	if len(free) > 0 {
		return span{Hosts: len(free), Cores: median(free)}
	}
	return span{Hosts: len(busy), Cores: median(busy), Busy: true}
}

// parseSinfo reads `sinfo -h -N -o "%N %C"`: a node per line (a node in
// several partitions appears once per partition) with its CPUs as
// allocated/idle/other/total, "other" being those of a node down or
// drained.
func parseSinfo(out string) (span, error) {
	seen := map[string]bool{}
	var free, busy []int
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 || seen[f[0]] {
			continue
		}
		var cpu [4]int
		parts := strings.Split(f[len(f)-1], "/")
		if len(f) != 2 || len(parts) != 4 {
			return span{}, fmt.Errorf("sinfo: %q: want NODE A/I/O/T", strings.TrimSpace(line))
		}
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return span{}, fmt.Errorf("sinfo: %q: want NODE A/I/O/T", strings.TrimSpace(line))
			}
			cpu[i] = n
		}
		seen[f[0]] = true
		alloc, idle, other := cpu[0], cpu[1], cpu[2]
		switch {
		case idle > 0:
			free = append(free, idle)
		case alloc > 0 && other == 0:
			busy = append(busy, alloc)
		}
	}
	if len(seen) == 0 {
		return span{}, errors.New("sinfo lists no nodes")
	}
	return spanOf(free, busy), nil
}

// parseQstatGC reads Grid Engine's `qstat -g c`: a header naming the
// columns (RES is missing from older versions), then a line per cluster
// queue with its slots. It returns the free slots as hosts of one core
// each: the listing does not say how slots group into hosts, and a job of
// more than one slot needs a parallel environment the site may not have.
func parseQstatGC(out string) (span, error) {
	var col map[string]int
	free, busy := 0, 0
	queues := 0
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "---"):
			continue
		case col == nil:
			// "CLUSTER QUEUE" is one column of two words.
			if len(f) < 2 || f[0] != "CLUSTER" || f[1] != "QUEUE" {
				return span{}, fmt.Errorf("qstat -g c: header %q: want CLUSTER QUEUE CQLOAD USED … AVAIL TOTAL", strings.TrimSpace(line))
			}
			col = map[string]int{}
			for i, name := range f[2:] {
				col[name] = i + 1
			}
			for _, name := range []string{"USED", "AVAIL", "TOTAL"} {
				if _, ok := col[name]; !ok {
					return span{}, fmt.Errorf("qstat -g c: header %q: no %s column", strings.TrimSpace(line), name)
				}
			}
			continue
		}
		num := func(name string) (int, error) {
			i, ok := col[name]
			if !ok {
				return 0, nil
			}
			if i >= len(f) {
				return 0, fmt.Errorf("qstat -g c: %q: no %s", strings.TrimSpace(line), name)
			}
			n, err := strconv.Atoi(f[i])
			if err != nil {
				return 0, fmt.Errorf("qstat -g c: %q: %s: %w", strings.TrimSpace(line), name, err)
			}
			return n, nil
		}
		var avail, used, res int
		var err error
		if avail, err = num("AVAIL"); err == nil {
			if used, err = num("USED"); err == nil {
				res, err = num("RES")
			}
		}
		if err != nil {
			return span{}, err
		}
		queues++
		free += avail
		busy += used + res
	}
	if queues == 0 {
		return span{}, errors.New("qstat -g c lists no queues")
	}
	if free > 0 {
		return span{Hosts: free, Cores: 1}, nil
	}
	return span{Hosts: busy, Cores: 1, Busy: true}, nil
}

// parseCondorStatus reads `condor_status -af Cpus State`: a slot per
// line. Unclaimed slots are free; claimed ones (and those being matched
// or preempted) are busy; slots their owners use, or drained, are not
// HTCondor's to give.
func parseCondorStatus(out string) (span, error) {
	var free, busy []int
	slots := 0
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return span{}, fmt.Errorf("condor_status: %q: want CPUS STATE", strings.TrimSpace(line))
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			return span{}, fmt.Errorf("condor_status: %q: %w", strings.TrimSpace(line), err)
		}
		slots++
		switch f[1] {
		case "Unclaimed":
			free = append(free, n)
		case "Claimed", "Matched", "Preempting", "Backfill":
			busy = append(busy, n)
		}
	}
	if slots == 0 {
		return span{}, errors.New("condor_status lists no slots")
	}
	return spanOf(free, busy), nil
}

// A catalogListing is what the catalogs say of a Work Queue project.
type catalogListing struct {
	span
	Source string
}

// catalogWidth asks the catalogs at addrs, in turn, for the masters and
// factories of project, and returns the workers they report: those
// connected to its masters now, or, if more, those its factories may
// start. It fails when no catalog answers or none lists the project.
func catalogWidth(ctx context.Context, addrs []string, project string) (catalogListing, error) {
	if len(addrs) == 0 {
		return catalogListing{}, errors.New("no catalog to ask")
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	var errs []error
	for _, addr := range addrs {
		recs, err := catalog.Query(ctx, addr, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if l, ok := projectWidth(recs, project); ok {
			return l, nil
		}
	}
	if len(errs) == len(addrs) {
		return catalogListing{}, errors.Join(errs...)
	}
	return catalogListing{}, fmt.Errorf("no catalog lists Work Queue project %q", project)
}

// projectWidth reads the records of project's masters and factories out
// of a catalog's answer. It reports whether there were any.
func projectWidth(recs []catalog.Record, project string) (catalogListing, bool) {
	var workers, cores, factoryMax int
	found := false
	for _, m := range catalog.Masters(recs) {
		if m.Project != project {
			continue
		}
		found = true
		workers += int(m.Record.Int("workers"))
		// Our masters and newer CCTools report cores_total; older ones
		// total_cores.
		c := m.Record.Int("cores_total")
		if c == 0 {
			c = m.Record.Int("total_cores")
		}
		cores += int(c)
	}
	for _, r := range recs {
		if r.String("type") == "wq_factory" && r.String("project") == project {
			found = true
			factoryMax += int(r.Int("max_workers"))
		}
	}
	if !found {
		return catalogListing{}, false
	}
	l := catalogListing{span: span{Hosts: workers}}
	if workers > 0 && cores > 0 {
		l.Cores = int(math.Round(float64(cores) / float64(workers)))
	}
	l.Source = fmt.Sprintf("the catalog: workers of project %s", project)
	if factoryMax > workers {
		l.Hosts = factoryMax
		l.Source = fmt.Sprintf("the catalog: project %s's factories start up to %d workers (%d connected now)", project, factoryMax, workers)
	}
	return l, true
}
