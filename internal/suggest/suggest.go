// Package suggest finds what a user probably meant by a name a program
// does not know — a misspelt key of a JSON file, an unknown flag — among
// the names it knows, for the "did you mean" of an error message.
package suggest

// Nearest returns the one of known that name is most likely a typo of:
// the closest by edit distance, at most two edits away and fewer than
// name's length, so that a short name does not match everything; "" if
// none is.
func Nearest(name string, known []string) string {
	best, bestD := "", min(3, len(name))
	for _, k := range known {
		if abs(len(k)-len(name)) >= bestD {
			continue // at least that many insertions or deletions
		}
		if d := Distance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes: the
// fewest insertions, deletions and substitutions that make one the other.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
