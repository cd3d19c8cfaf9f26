package place

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/gonum/stat"
)

// A Record is one finished run: what was predicted for the mode it ran in,
// and what it took.
type Record struct {
	Time time.Time `json:"time"`
	Tool string    `json:"tool"` // allpairs, wavefront, makeflow
	// Key names the work: the function and the problem's shape, or the
	// workflow. Runs with the same Key, Mode and Backend correct each
	// other's predictions.
	Key       string  `json:"key"`
	Mode      string  `json:"mode"`    // Mode.String()
	Backend   string  `json:"backend"` // batch type, or "" for multicore
	Predicted float64 `json:"predicted_s"`
	Measured  float64 `json:"measured_s"`
	// Work is the part of the work this run did, from 0 to 1 (a resumed
	// run does only the missing part); Predicted and Measured are for that
	// part.
	Work float64 `json:"work,omitempty"`
}

// Ratio is how much longer the run took than predicted: Measured/Predicted.
func (r Record) Ratio() float64 { return r.Measured / r.Predicted }

// A History is the file of run records, one JSON object per line. The
// zero History (empty Path) keeps nothing.
type History struct {
	Path string
	// MaxBytes bounds the file (default 4 MiB, some 15,000 records): when
	// an append takes it past, it is rewritten with only the records a
	// correction can still use, the latest historyWindow of each tool,
	// key, mode and back end. Every placed run reads the whole file.
	MaxBytes int64
}

const defaultHistoryBytes = 4 << 20

// DefaultHistory returns the history in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache, rightsize/runs.jsonl), or the zero
// History if there is none.
func DefaultHistory() History {
	dir, err := os.UserCacheDir()
	if err != nil {
		return History{}
	}
	return History{Path: filepath.Join(dir, "rightsize", "runs.jsonl")}
}

// historyWindow is how many of the latest matching runs a correction uses:
// enough to smooth noise, few enough to follow a machine that changed.
const historyWindow = 10

// Append adds r to the history. Runs too short or too partial to say
// anything about a prediction (under a tenth of a second, or a prediction
// of zero) are skipped.
func (h History) Append(r Record) error {
	if h.Path == "" || !(r.Predicted > 0) || r.Measured < 0.1 || math.IsInf(r.Predicted, 0) {
		return nil
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
		return fmt.Errorf("run history: %w", err)
	}
	f, err := os.OpenFile(h.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("run history: %w", err)
	}
	// One write of a whole line: concurrent runs append whole records.
	_, err = f.Write(append(b, '\n'))
	var size int64
	if st, serr := f.Stat(); serr == nil {
		size = st.Size()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("run history: %w", err)
	}
	if size > cmp.Or(h.MaxBytes, defaultHistoryBytes) {
		if err := h.compact(); err != nil {
			return fmt.Errorf("run history: %w", err)
		}
	}
	return nil
}

// compact rewrites the history with only the records corrections use:
// the latest historyWindow of each tool, key, mode and back end, in their
// order. It replaces the file in one rename; a record another run appends
// meanwhile may be lost, which costs a correction one sample.
func (h History) compact() error {
	recs, err := h.read(func([]byte) bool { return true })
	if err != nil {
		return err
	}
	type group struct{ tool, key, mode, backend string }
	left := map[group]int{}
	keep := make([]bool, len(recs))
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		g := group{r.Tool, r.Key, r.Mode, r.Backend}
		if left[g] < historyWindow {
			left[g]++
			keep[i] = true
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(h.Path), ".runs-*.jsonl")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is none
	w := bufio.NewWriter(tmp)
	for i, r := range recs {
		if !keep[i] {
			continue
		}
		b, err := json.Marshal(r)
		if err != nil {
			tmp.Close()
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	err = w.Flush()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), h.Path)
}

// Records returns the records of tool and key, oldest first. A missing
// history has none; a line that is not a record (a torn last line, another
// version's format) is skipped.
func (h History) Records(tool, key string) ([]Record, error) {
	// Only lines naming the key are decoded: the history holds every
	// workflow's and function's runs.
	needle, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	needle = append([]byte(`"key":`), needle...)
	recs, err := h.read(func(line []byte) bool { return bytes.Contains(line, needle) })
	out := recs[:0]
	for _, r := range recs {
		if r.Tool == tool && r.Key == key {
			out = append(out, r)
		}
	}
	return out, err
}

// read returns the history's records whose lines pass match, oldest first,
// skipping lines that are not records (a torn last line, another version's
// format) and records that say nothing of a prediction.
func (h History) read(match func(line []byte) bool) ([]Record, error) {
	if h.Path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(h.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run history: %w", err)
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Record
		if !match(sc.Bytes()) || json.Unmarshal(sc.Bytes(), &r) != nil || !(r.Predicted > 0) || !(r.Measured > 0) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// A Correction scales a mode's prediction by what earlier runs of the same
// work on the same back end measured.
type Correction struct {
	Factor float64 // multiply the model's prediction by this; 1 with no runs
	Runs   int     // how many runs it comes from
	// Spread is the geometric standard deviation of the runs' ratios (1
	// when they agree): how far the corrected prediction may still be off.
	Spread float64
}

func (c Correction) String() string {
	if c.Runs == 0 {
		return "no earlier runs"
	}
	runs := "runs"
	if c.Runs == 1 {
		runs = "run"
	}
	return fmt.Sprintf("×%.2f from %d earlier %s, spread ×%.2f", c.Factor, c.Runs, runs, c.Spread)
}

// Corrections returns, for each mode and back end ("mode/backend"), the
// correction of the latest runs in records: the geometric mean of their
// measured/predicted ratios, since the models' errors are multiplicative.
func Corrections(records []Record) map[string]Correction {
	groups := map[string][]float64{}
	for _, r := range records {
		k := r.Mode + "/" + r.Backend
		groups[k] = append(groups[k], math.Log(r.Ratio()))
	}
	out := make(map[string]Correction, len(groups))
	for k, logs := range groups {
		if len(logs) > historyWindow {
			logs = logs[len(logs)-historyWindow:]
		}
		mean, std := stat.MeanStdDev(logs, nil)
		if len(logs) == 1 {
			std = 0
		}
		out[k] = Correction{Factor: math.Exp(mean), Runs: len(logs), Spread: math.Exp(std)}
	}
	return out
}

// CorrectionKey is the key of Corrections' map for mode on backend.
func CorrectionKey(m Mode, backend string) string {
	if m == Multicore {
		backend = ""
	}
	return m.String() + "/" + backend
}

// Corrections returns the corrections of the earlier runs of tool and key.
func (h History) Corrections(tool, key string) (map[string]Correction, error) {
	recs, err := h.Records(tool, key)
	return Corrections(recs), err
}
