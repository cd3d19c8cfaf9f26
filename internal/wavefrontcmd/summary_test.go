package wavefrontcmd

import (
	"testing"
	"time"
)

// TestSummarySentences: the run's summary is in the number each count
// needs, whatever the counts.
func TestSummarySentences(t *testing.T) {
	const where = "R.matrix"
	failed := []struct {
		failed, notRun, kept int
		want                 string
	}{
		{1, 0, 0, "1 cell failed; no cell finished"},
		{1, 1, 1, "1 cell failed and 1 cell that depends on it was not run; the 1 finished cell is kept in R.matrix"},
		{1, 3, 18, "1 cell failed and 3 cells that depend on it were not run; the 18 finished cells are kept in R.matrix"},
		{2, 0, 5, "2 cells failed; the 5 finished cells are kept in R.matrix"},
		{2, 1, 5, "2 cells failed and 1 cell that depends on them was not run; the 5 finished cells are kept in R.matrix"},
		{3, 7, 1, "3 cells failed and 7 cells that depend on them were not run; the 1 finished cell is kept in R.matrix"},
	}
	for _, tc := range failed {
		if got := cellsFailed(tc.failed, tc.notRun, keptIn(tc.kept, where)); got != tc.want {
			t.Errorf("cellsFailed(%d, %d, keptIn(%d)) = %q, want %q", tc.failed, tc.notRun, tc.kept, got, tc.want)
		}
	}
	blocks := []struct {
		notRun, blocks int
		want           string
	}{
		{0, 1, ""},
		{1, 1, "1 cell that depends on it was not run"},
		{16, 1, "16 cells that depend on it were not run"},
		{1, 2, "1 cell that depends on them was not run"},
		{16, 2, "16 cells that depend on them were not run"},
	}
	for _, tc := range blocks {
		if got := notRun(tc.notRun, tc.blocks); got != tc.want {
			t.Errorf("notRun(%d, %d) = %q, want %q", tc.notRun, tc.blocks, got, tc.want)
		}
	}
	done := []struct {
		computed, skipped int
		want              string
	}{
		{0, 0, "computed 0 cells in 2s, 0 cells/s; results in R.matrix"},
		{1, 0, "computed 1 cell in 2s, 0 cells/s; results in R.matrix"},
		{4, 1, "computed 4 cells (1 was already done) in 2s, 2 cells/s; results in R.matrix"},
		{4, 2, "computed 4 cells (2 were already done) in 2s, 2 cells/s; results in R.matrix"},
	}
	for _, tc := range done {
		if got := computed(tc.computed, tc.skipped, 2*time.Second, where); got != tc.want {
			t.Errorf("computed(%d, %d) = %q, want %q", tc.computed, tc.skipped, got, tc.want)
		}
	}
}
