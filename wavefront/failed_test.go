package wavefront

import (
	"errors"
	"testing"
)

// TestFailedErrorSentence: the message is in the number each count needs.
func TestFailedErrorSentence(t *testing.T) {
	cell := &CellError{X: 2, Y: 1, Err: errors.New("exit status 3")}
	for _, tc := range []struct {
		failed, notRun int
		want           string
	}{
		{1, 0, "1 cell failed; first cell (2,1): exit status 3"},
		{1, 1, "1 cell failed and 1 cell that depends on it was not run; first cell (2,1): exit status 3"},
		{1, 3, "1 cell failed and 3 cells that depend on it were not run; first cell (2,1): exit status 3"},
		{2, 1, "2 cells failed and 1 cell that depends on them was not run; first cell (2,1): exit status 3"},
		{2, 5, "2 cells failed and 5 cells that depend on them were not run; first cell (2,1): exit status 3"},
	} {
		e := &FailedError{NotRun: tc.notRun}
		for range tc.failed {
			e.Failed = append(e.Failed, cell)
		}
		if got := e.Error(); got != tc.want {
			t.Errorf("%d failed, %d not run: %q, want %q", tc.failed, tc.notRun, got, tc.want)
		}
	}
}
