package funcs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// SWCell is the built-in Wavefront cell "swcell": one block of a
// Smith–Waterman local alignment of two long sequences, so that Wavefront can
// align sequences too long for one machine (seed 000 §5.1), with the scoring
// of SWAlign (+3 match, -3 mismatch, -2 per gap position).
//
// Sequence A is cut into chunks along x and B along y: the boundary file
// R.i.0 holds chunk i of A and R.0.j chunk j of B, as plain letters or FASTA
// (R.0.0 may hold anything). Cell (i,j) fills the block of the dynamic
// programme where chunk i meets chunk j, from the programme's last row of
// the cell below, the last column of the cell to the left and the corner of
// the diagonal cell, and passes on what later cells need:
//
//	swcell best 13      the best score anywhere in the cells up to this one
//	a ACGT…             chunk i of A (for the cell above)
//	b GGTA…             chunk j of B (for the cell to the right)
//	top 0 3 1 …         the block's top row of scores
//	right 0 2 5 …       the block's right column of scores
//
// The last cell's best is the Smith–Waterman score of A against B, equal to
// SWAlign(A, B). Memory and output are linear in the chunk sizes.
func SWCell(left, below, diag []byte) ([]byte, error) {
	l, err := parseSWInput(left)
	if err != nil {
		return nil, fmt.Errorf("swcell: left input: %w", err)
	}
	b, err := parseSWInput(below)
	if err != nil {
		return nil, fmt.Errorf("swcell: below input: %w", err)
	}
	d, err := parseSWInput(diag)
	if err != nil && !errors.Is(err, errEmptyChunk) { // R.0.0 may be empty
		return nil, fmt.Errorf("swcell: diagonal input: %w", err)
	}
	a := b.a // chunk i runs up the column
	seqB := l.b
	if l.boundary {
		seqB = l.seq
	}
	if b.boundary {
		a = b.seq
	}
	row := b.top // H[p][q-1] for the p of this chunk
	if b.boundary {
		row = make([]int32, len(a))
	}
	col := l.right // H[p_start-1][q] for the q of this chunk
	if l.boundary {
		col = make([]int32, len(seqB))
	}
	var corner int32 // H[p_start-1][q_start-1]
	if !d.boundary && len(d.top) > 0 {
		corner = d.top[len(d.top)-1]
	}
	best := max(l.best, b.best, d.best)
	right := make([]int32, len(seqB))
	row = append([]int32(nil), row...)
	for q, bq := range seqB {
		diagScore := corner // H[p-1][q-1], starting left of the block
		if q > 0 {
			diagScore = col[q-1]
		}
		leftScore := col[q] // H[p-1][q]
		for p, ap := range a {
			s := int32(swMismatch)
			if ap == bq {
				s = swMatch
			}
			h := max(0, diagScore+s, row[p]+swGap, leftScore+swGap)
			diagScore = row[p]
			row[p] = h
			leftScore = h
			best = max(best, h)
		}
		right[q] = leftScore
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "swcell best %d\na %s\nb %s\ntop", best, a, seqB)
	writeScores(&out, row)
	out.WriteString("\nright")
	writeScores(&out, right)
	return out.Bytes(), nil
}

func writeScores(out *bytes.Buffer, scores []int32) {
	var buf []byte
	for _, s := range scores {
		buf = append(buf[:0], ' ')
		buf = strconv.AppendInt(buf, int64(s), 10)
		out.Write(buf)
	}
}

// swInput is a parsed input of SWCell: a boundary chunk or a computed cell.
type swInput struct {
	boundary   bool
	seq        []byte // a boundary's chunk
	best       int32
	a, b       []byte
	top, right []int32
}

var errEmptyChunk = errors.New("empty sequence chunk")

func parseSWInput(in []byte) (swInput, error) {
	rest, ok := bytes.CutPrefix(in, []byte("swcell best "))
	if !ok {
		seq := sequence(in)
		if len(seq) == 0 {
			return swInput{boundary: true}, errEmptyChunk
		}
		return swInput{boundary: true, seq: seq}, nil
	}
	var c swInput
	lines := bytes.Split(rest, []byte("\n"))
	best, err := strconv.ParseInt(string(lines[0]), 10, 32)
	if err != nil {
		return c, fmt.Errorf("bad best score %q", truncate(lines[0], 20))
	}
	c.best = int32(best)
	seen := 0
	for _, line := range lines[1:] {
		if len(line) == 0 {
			continue // a trailing newline, if the value went through a file
		}
		key, val, _ := bytes.Cut(line, []byte(" "))
		switch string(key) {
		case "a":
			c.a = val
		case "b":
			c.b = val
		case "top":
			c.top, err = parseScores(line[len("top"):])
		case "right":
			c.right, err = parseScores(line[len("right"):])
		default:
			return c, fmt.Errorf("unexpected line %q", truncate(line, 20))
		}
		if err != nil {
			return c, err
		}
		seen++
	}
	if seen != 4 || len(c.a) == 0 || len(c.b) == 0 || len(c.top) != len(c.a) || len(c.right) != len(c.b) {
		return c, errors.New("not a complete swcell result (want the lines a, b, top and right, with a score for every letter)")
	}
	return c, nil
}

func parseScores(s []byte) ([]int32, error) {
	fields := bytes.Fields(s)
	scores := make([]int32, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(string(f), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad score %q", truncate(f, 20))
		}
		scores[i] = int32(v)
	}
	return scores, nil
}
