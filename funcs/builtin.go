package funcs

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"math/big"
	"strconv"
)

// ByteDiff is the built-in "bytediff": the number of byte positions at which
// a and b differ, counting every byte of the longer input beyond the end of
// the shorter one as a difference. It is the function of seed 000's Fig. 3.4
// microbenchmark and a stand-in for biometric template distance.
func ByteDiff(a, b []byte) ([]byte, error) {
	return strconv.AppendInt(nil, int64(countDiff(a, b)), 10), nil
}

func countDiff(a, b []byte) int {
	n := min(len(a), len(b))
	diff := max(len(a), len(b)) - n
	// A chunk at a time: XOR the inputs into a buffer that stays in the L1
	// cache, where a zero byte is a byte the inputs agree on, then count
	// the zeros. Both steps are the standard library's vectorised loops
	// (SSE2 XOR, AVX2 byte count on amd64), several times faster than any
	// word-at-a-time loop Go can compile, and neither allocates.
	var x [diffChunk]byte
	for i := 0; i < n; i += diffChunk {
		k := min(diffChunk, n-i)
		subtle.XORBytes(x[:k], a[i:i+k], b[i:i+k])
		diff += k - bytes.Count(x[:k], []byte{0})
	}
	return diff
}

// diffChunk is countDiff's chunk: small enough for the L1 cache with the
// inputs streaming past it, large enough that the calls cost nothing.
const diffChunk = 2 << 10

// ByteDiffBlock is ByteDiff for a block of cells: its results are
// ByteDiff(a[r], b[c]) for every r and c, row by row. It compares the
// inputs a section at a time, every pair's section before any pair's next
// one, so that the sections of all the block's inputs stay in the core's L2
// cache together: each byte of an input is read from memory once for the
// block, not once for each of its cells. With a copy of every cell in the
// cache (the compute floor), the cells cost the same either way; with the
// inputs in the page cache, an All-Pairs run of 1 MiB items takes 20% less
// time in blocks of 4×10 than cell by cell (bench/RESULTS.md, "All-Pairs on
// this machine").
func ByteDiffBlock(a, b [][]byte) ([][]byte, error) {
	diffs := make([]int, len(a)*len(b))
	common := 0 // the longest prefix any pair has in common
	for r, x := range a {
		for c, y := range b {
			n := min(len(x), len(y))
			diffs[r*len(b)+c] = max(len(x), len(y)) - n
			common = max(common, n)
		}
	}
	section := blockSection(len(a) + len(b))
	for off := 0; off < common; off += section {
		for r, x := range a {
			if off >= len(x) {
				continue
			}
			for c, y := range b {
				if end := min(off+section, len(x), len(y)); off < end {
					diffs[r*len(b)+c] += countDiff(x[off:end], y[off:end])
				}
			}
		}
	}
	out := make([][]byte, len(diffs))
	for k, d := range diffs {
		out[k] = strconv.AppendInt(nil, int64(d), 10)
	}
	return out, nil
}

// blockSection is ByteDiffBlock's section for a block of n inputs: n
// sections fill at most half of a 2 MiB L2 cache (the other half is for
// what streams past), within 2 KiB (diffChunk) and 64 KiB, a multiple of
// diffChunk. In 4×10 blocks of 1 MiB items, sections of 16 KiB cost 5% more
// than 64 KiB, of 8 KiB 13–17%, of 2 KiB 2.2–2.5 times as much: the calls
// per section and the streams the core's prefetchers must follow grow as
// sections shrink.
func blockSection(n int) int {
	s := (1 << 20) / max(n, 1)
	return min(max(s/diffChunk*diffChunk, diffChunk), 64<<10)
}

// Smith-Waterman scoring used by SWAlign: a linear gap penalty, as in the
// textbook example (TGTTACGG against GGTTGACTA scores 13).
const (
	swMatch    = 3
	swMismatch = -3
	swGap      = -2
)

// SWAlign is the built-in "swalign": the Smith-Waterman local-alignment
// score of two sequences, scoring +3 for a match, -3 for a mismatch and -2
// for each gap position (a linear gap penalty). Inputs may be plain sequences
// or FASTA: header lines starting with '>' and all whitespace are ignored,
// and letters are compared without regard to case. It needs O(len(b)) memory
// and O(len(a)·len(b)) time.
func SWAlign(a, b []byte) ([]byte, error) {
	return strconv.AppendInt(nil, int64(swScore(sequence(a), sequence(b))), 10), nil
}

// sequence strips FASTA headers and whitespace and upper-cases letters.
func sequence(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for len(in) > 0 {
		line := in
		if i := bytes.IndexByte(in, '\n'); i >= 0 {
			line, in = in[:i], in[i+1:]
		} else {
			in = nil
		}
		if len(line) > 0 && line[0] == '>' {
			continue
		}
		for _, c := range line {
			switch {
			case c == ' ' || c == '\t' || c == '\r':
			case 'a' <= c && c <= 'z':
				out = append(out, c-'a'+'A')
			default:
				out = append(out, c)
			}
		}
	}
	return out
}

func swScore(a, b []byte) int {
	if len(a) < len(b) {
		a, b = b, a // keep the row short
	}
	row := make([]int32, len(b)+1)
	best := int32(0)
	for i := range a {
		diag := int32(0) // H[i-1][j-1]
		for j := range b {
			up := row[j+1] // H[i-1][j]
			s := int32(swMismatch)
			if a[i] == b[j] {
				s = swMatch
			}
			h := max(0, diag+s, up+swGap, row[j]+swGap)
			diag = up
			row[j+1] = h
			best = max(best, h)
		}
	}
	return int(best)
}

// Sum is the built-in Wavefront cell "sum": x + y + d, each input a decimal
// integer (surrounding whitespace ignored), exact at any size. With
// R[i,0] = i and R[0,j] = j, R[9,9] is 1854882.
func Sum(x, y, d []byte) ([]byte, error) {
	inputs := [3][]byte{bytes.TrimSpace(x), bytes.TrimSpace(y), bytes.TrimSpace(d)}
	var sum int64
	exact := true
	for _, in := range inputs {
		v, err := strconv.ParseInt(string(in), 10, 64)
		if err != nil || overflows(sum, v) {
			exact = false
			break
		}
		sum += v
	}
	if exact {
		return strconv.AppendInt(nil, sum, 10), nil
	}
	total := new(big.Int)
	for _, in := range inputs {
		v, ok := new(big.Int).SetString(string(in), 10)
		if !ok {
			return nil, fmt.Errorf("sum: %q is not an integer", truncate(in, 40))
		}
		total.Add(total, v)
	}
	return total.Append(nil, 10), nil
}

func overflows(a, b int64) bool {
	s := a + b
	return (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0)
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// errUnknownBuiltin is wrapped by the error for a builtin: name that is not
// registered.
var errUnknownBuiltin = errors.New("unknown built-in function")
