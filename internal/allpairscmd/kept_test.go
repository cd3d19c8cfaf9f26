package allpairscmd

import "testing"

// TestKeptSentence: where the finished cells are kept is said in the
// number each count needs.
func TestKeptSentence(t *testing.T) {
	var none *checkpoint
	for _, tc := range []struct {
		n       int64
		pronoun bool
		want    string
	}{
		{0, false, "no cell finished: run the same command again to resume"},
		{1, false, "the 1 finished cell is kept nowhere (no checkpoint), so a re-run computes it again"},
		{2, false, "the 2 finished cells are kept nowhere (no checkpoint), so a re-run computes them again"},
		{1, true, "it is kept nowhere (no checkpoint), so a re-run computes it again"},
		{3, true, "they are kept nowhere (no checkpoint), so a re-run computes them again"},
	} {
		if got := none.kept(tc.n, tc.pronoun, "resume"); got != tc.want {
			t.Errorf("kept(%d, %v) = %q, want %q", tc.n, tc.pronoun, got, tc.want)
		}
	}
}
