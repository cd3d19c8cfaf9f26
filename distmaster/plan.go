package distmaster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rightsize/rightsize/sparsematrix"
)

// PlanSuffix is added to a checkpoint's name to name its plan file.
const PlanSuffix = ".plan"

// plan is the small file kept beside a checkpoint: the job size, so that a
// re-run resumes with the same blocks (and does not recompute finished ones
// because a new benchmark chose another size), and the shape of the problem
// it was chosen for. What the cells were computed from is the checkpoint's
// own business (its header); a plan is only a hint.
type plan struct {
	Problem string `json:"problem"`
	JobW    int    `json:"job_width"`
	JobH    int    `json:"job_height"`
}

// readPlan reads the plan beside checkpoint, or returns nil if there is
// none, or if it is not one for this problem (a checkpoint removed to start
// over leaves its plan behind): the job size is then chosen again, and
// explain says why.
func readPlan(checkpoint, problem string, explain io.Writer) (*plan, error) {
	path := checkpoint + PlanSuffix
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p plan
	if err := json.Unmarshal(b, &p); err != nil || p.JobW < 1 || p.JobH < 1 {
		fmt.Fprintf(explain, "ignoring %s: not a plan file written by rightsize\n", path)
		return nil, nil
	}
	if p.Problem != problem {
		fmt.Fprintf(explain, "ignoring %s: it is the plan of another problem (%s)\n", path, p.Problem)
		return nil, nil
	}
	return &p, nil
}

// writePlan writes the plan beside checkpoint, atomically.
func writePlan(checkpoint string, p plan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	path := checkpoint + PlanSuffix
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// startWork says how many blocks there are to compute and prepares the
// run's work directory, emptying what a killed run left there.
func startWork(cfg *Config, todo, total int) error {
	fmt.Fprintf(cfg.Explain, "%d of %d blocks to compute, as jobs on %s\n", todo, total, cfg.Kind)
	if err := os.RemoveAll(cfg.WorkDir); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	return nil
}

// scanCells reads the cells a block's job returned in dir.
func scanCells(dir string, fn func(sparsematrix.Record) error) error {
	err := sparsematrix.Scan(filepath.Join(dir, "cells.matrix"), fn)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no cells came back")
	}
	if err != nil {
		return fmt.Errorf("the cells it returned: %w", err)
	}
	return nil
}

// DefaultWorkDir is the work directory of a run whose checkpoint is at
// checkpoint: beside it, so that on a cluster it is on the same (shared)
// filesystem.
func DefaultWorkDir(checkpoint string) string {
	return filepath.Join(filepath.Dir(checkpoint), "."+filepath.Base(checkpoint)+".jobs")
}

// bitset marks cells done, a bit each: a problem's cells can number in the
// hundreds of millions.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// clear unmarks i.
func (b bitset) clear(i int) { b[i/64] &^= 1 << (i % 64) }

// set marks i, reporting whether it was unmarked.
func (b bitset) set(i int) bool {
	if b.has(i) {
		return false
	}
	b[i/64] |= 1 << (i % 64)
	return true
}
