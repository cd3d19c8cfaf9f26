package pool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/workqueue/factory"
)

// Policy is a worker pool's policy file (seed 000 §4.4.3): how many
// workers the pool keeps at most and how it shares them between projects.
//
// The file holds one "name: value" a line; blank lines and lines starting
// with # are ignored:
//
//	max_workers: 2000
//	distribution: proj1=500, proj2.*=1500
//	max_change: 60
//	default_capacity: 20
//	billing_cycle: 20m
//	decision: D7
//	strategy: additive
//	shapes: 4x2h, 16x30m
type Policy struct {
	// MaxWorkers bounds the workers the pool keeps submitted (required).
	MaxWorkers int
	// Distribution says which masters the pool serves and in what
	// proportions when workers are scarce (required).
	Distribution []Share
	// MaxChange bounds how fast the pool decision rises under D2, D5, D6
	// and D7, in workers a minute (default 60).
	MaxChange float64
	// DefaultCapacity is the capacity, in tasks, assumed under D4, D6 and D7
	// for a master that has not reported one (default 20).
	DefaultCapacity int
	// BillingCycle, if set, is the period the workers' resources are billed
	// by: a worker without work stays until near the end of its current
	// cycle rather than leaving at its idle timeout.
	BillingCycle time.Duration
	// Decision is how the masters' tasks and capacities become their needs
	// (default D6, or D7 with a billing cycle).
	Decision factory.Policy
	// Strategy is how a master's missing workers become batch requests
	// (factory.Strategy; default one-at-a-time, a job per worker).
	Strategy factory.Strategy
	// Shapes, if set, are the cores and wall times a worker job may have
	// (seed 002's moldable requests; batch/shape): each request is
	// submitted as the one predicted to finish first. They replace the
	// pool's Config.Shapes.
	Shapes []shape.Shape

	decisionLine int // where decision was given, for errors
}

// A Share is one entry of the distribution: the masters whose project
// matches Pattern (anchored) share Workers workers by default.
type Share struct {
	Pattern *regexp.Regexp
	Source  string // the pattern as written
	Workers int
}

// ParsePolicy reads a policy file from r; name is the file's name for
// errors, which say name:line.
func ParsePolicy(r io.Reader, name string) (*Policy, error) {
	p := &Policy{}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(text, ":")
		if !ok {
			// The line is not quoted: a file put in the policy's
			// place (a link to a secret) must not reach the log.
			return nil, fmt.Errorf("%s:%d: want name: value, got a line without a colon", name, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if prev, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s:%d: %s given again (first at line %d)", name, line, clip(key), prev)
		}
		seen[key] = line
		if err := p.set(key, value); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, line, clip(key), err)
		}
		if key == "decision" {
			p.decisionLine = line
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// clip is a setting's name as errors quote it: as written if it could be
// one (a few lower-case letters and underscores, as a typo of one), else
// not at all, so that no more of a file put in the policy's place (a link
// to a secret) than such a word reaches the log.
func clip(key string) string {
	if len(key) == 0 || len(key) > 20 || strings.Trim(key, "abcdefghijklmnopqrstuvwxyz_") != "" {
		return "(a name that is no setting)"
	}
	return key
}

// set records one field of the file.
func (p *Policy) set(key, value string) error {
	var err error
	switch key {
	case "max_workers":
		p.MaxWorkers, err = count(value, 1)
	case "distribution":
		p.Distribution, err = parseDistribution(value)
	case "max_change":
		p.MaxChange, err = strconv.ParseFloat(value, 64)
		if err == nil && !(p.MaxChange > 0) {
			err = fmt.Errorf("%q is not a positive number of workers a minute", value)
		}
	case "default_capacity":
		p.DefaultCapacity, err = count(value, 1)
	case "billing_cycle":
		p.BillingCycle, err = duration(value)
	case "decision":
		p.Decision, err = factory.ParsePolicy(value)
	case "strategy":
		p.Strategy, err = factory.ParseStrategy(value)
	case "shapes":
		p.Shapes, err = shape.Parse(value)
	default:
		return errors.New("unknown setting (max_workers, distribution, max_change, default_capacity, billing_cycle, decision, strategy, shapes)")
	}
	return err
}

// count reads a whole number of at least least.
func count(s string, least int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		return 0, fmt.Errorf("%q is not a whole number of at least %d", s, least)
	}
	return n, nil
}

// duration reads a duration: seconds, or a Go duration such as 20m.
func duration(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (seconds, or e.g. 20m)", s)
	}
	return d, nil
}

// parseDistribution reads "regex=workers, regex=workers".
func parseDistribution(s string) ([]Share, error) {
	var out []Share
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i := strings.LastIndex(entry, "=")
		if i < 0 {
			return nil, fmt.Errorf("entry %q: want regex=workers", entry)
		}
		src, n := strings.TrimSpace(entry[:i]), strings.TrimSpace(entry[i+1:])
		if src == "" {
			return nil, fmt.Errorf("entry %q: no project pattern", entry)
		}
		re, err := regexp.Compile("^(" + src + ")$")
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		w, err := count(n, 1)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		out = append(out, Share{Pattern: re, Source: src, Workers: w})
	}
	if len(out) == 0 {
		return nil, errors.New("no entries")
	}
	return out, nil
}

// validate checks what no single line can, and fills in the defaults.
func (p *Policy) validate() error {
	switch {
	case p.MaxWorkers == 0:
		return errors.New("max_workers missing")
	case len(p.Distribution) == 0:
		return errors.New("distribution missing")
	}
	if p.MaxChange == 0 {
		p.MaxChange = 60
	}
	if p.DefaultCapacity == 0 {
		p.DefaultCapacity = 20
	}
	if p.Decision == 0 {
		p.Decision = factory.D6
		if p.BillingCycle > 0 {
			p.Decision = factory.D7
		}
	}
	if p.Decision == factory.D7 && p.BillingCycle == 0 {
		return fmt.Errorf("line %d: decision D7 needs a billing_cycle", p.decisionLine)
	}
	return nil
}

// shareOf returns the index of the distribution entry that matches
// project, the first that does, or -1.
func (p *Policy) shareOf(project string) int {
	for i, s := range p.Distribution {
		if s.Pattern.MatchString(project) {
			return i
		}
	}
	return -1
}
