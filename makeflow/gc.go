package makeflow

import (
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"
)

// GC is how a run deletes the intermediate files its rules make (CCTools'
// -g): a file some rule makes and other rules read, once every rule that
// reads it has completed. Files named in MAKEFLOW_INPUTS or
// MAKEFLOW_OUTPUTS, and files no rule reads (the workflow's results), are
// never deleted.
type GC int

const (
	GCNone     GC = iota // keep every file
	GCRefCount           // delete a file as soon as its last reader completes
	GCOnDemand           // delete them when more than GCCount made files are on disk, or free space is below GCSize
	GCAll                // as GCRefCount (CCTools' "all")
)

// ParseGC reads a GC mode by CCTools' name: none, ref_cnt, on_demand or all.
func ParseGC(s string) (GC, error) {
	switch s {
	case "none":
		return GCNone, nil
	case "ref_cnt", "ref_count":
		return GCRefCount, nil
	case "on_demand":
		return GCOnDemand, nil
	case "all":
		return GCAll, nil
	}
	return 0, fmt.Errorf("unknown garbage collection %q: none, ref_cnt, on_demand or all", s)
}

// fileDeleted is the log's file state of a file the run deleted.
const fileDeleted = 4

// collector keeps, for a run with garbage collection, the readers each
// intermediate file still has, and deletes the files left with none.
type collector struct {
	d       *driver
	mode    GC
	count   int   // on demand: more made files on disk than this
	size    int64 // on demand: less free space than this
	readers map[string]int
	keep    map[string]bool
	ready   map[string]bool // made, with no reader left: to delete
	live    int             // files made by rules and still on disk
	total   int             // files deleted so far
}

func newCollector(d *driver, done []bool) *collector {
	o := d.opts
	c := &collector{d: d, mode: o.GC, count: o.GCCount, size: o.GCSize,
		readers: map[string]int{}, keep: map[string]bool{}, ready: map[string]bool{}}
	if c.count <= 0 {
		c.count = 16
	}
	for _, f := range d.w.Inputs {
		c.keep[f] = true
	}
	for f := range outputFiles(d.w) {
		c.keep[f] = true
	}
	for id, r := range d.w.Rules {
		for _, f := range r.Sources {
			if !done[id] {
				c.readers[f.Name]++
			} else if _, ok := c.readers[f.Name]; !ok {
				c.readers[f.Name] = 0
			}
		}
	}
	// Intermediates an earlier run made whose readers are all done.
	for id, r := range d.w.Rules {
		if done[id] {
			c.made(r)
		}
	}
	return c
}

// collectable reports whether f is an intermediate file: made by a rule,
// read by one, and not kept.
func (c *collector) collectable(name string) bool {
	_, read := c.readers[name]
	_, made := c.d.g.producer[name]
	return read && made && !c.keep[name]
}

// made records that rule r's outputs exist.
func (c *collector) made(r *Rule) {
	for _, f := range r.Targets {
		if c.collectable(f.Name) {
			c.live++
			if c.readers[f.Name] == 0 {
				c.ready[f.Name] = true
			}
		}
	}
}

// completed records that rule r completed, and collects what the mode
// says to.
func (c *collector) completed(r *Rule) {
	c.made(r)
	for _, f := range r.Sources {
		if n, ok := c.readers[f.Name]; ok && n > 0 {
			c.readers[f.Name] = n - 1
			if n == 1 && c.collectable(f.Name) {
				c.ready[f.Name] = true
			}
		}
	}
	switch c.mode {
	case GCRefCount, GCAll:
		c.collect()
	case GCOnDemand:
		if c.live > c.count || c.size > 0 && freeSpace(c.d.dir) < c.size {
			c.collect()
		}
	}
}

// collect deletes every file ready to go, and logs it as CCTools does.
func (c *collector) collect() {
	if len(c.ready) == 0 {
		return
	}
	start := time.Now()
	names := make([]string, 0, len(c.ready))
	for name := range c.ready {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		delete(c.ready, name)
		c.live--
		if err := os.RemoveAll(inDir(c.d.dir, name)); err != nil {
			c.d.logger.Warn("garbage collection", "file", name, "err", err)
			continue
		}
		n++
		if c.d.log != nil {
			c.d.log.file(name, fileDeleted, 0)
		}
	}
	c.total += n
	c.d.logger.Debug("garbage collected", "files", n, "total", c.total)
	if c.d.log != nil {
		c.d.log.gc(n, time.Since(start), c.total)
	}
}

// freeSpace is the space left for this user on dir's file system, or the
// most there can be when it cannot be read.
func freeSpace(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 1<<63 - 1
	}
	return int64(st.Bavail) * st.Bsize
}
