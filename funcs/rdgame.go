package funcs

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// The R&D race's fixed parameters: the discount factor per period and the
// cost of effort e, RDGameCost·e²/2 per period.
const (
	RDGameDiscount = 0.95
	RDGameCost     = 1.0
)

// RDGame is the built-in Wavefront cell "rdgame": a two-firm R&D race, the
// kind of dynamic game seed 000 §5.3 solves backwards with Wavefront.
//
// Cell (x, y) is the state in which firm 1 is x steps and firm 2 is y steps
// from the technology frontier. Each period each firm chooses an effort e in
// [0, 1], paying RDGameCost·e²/2, and advances one step with probability e,
// independently of the other; values are discounted by RDGameDiscount. So
// the state moves to (x-1, y) (the left input), (x, y-1) (below), (x-1, y-1)
// (diagonal) or stays where it is. The boundary holds the end of the race:
// R.0.j is what the firms get when firm 1 has arrived first (for example
// "1 0", the whole prize to firm 1), R.i.0 when firm 2 has, and R.0.0 when
// they arrive together ("0.5 0.5").
//
// Each value is one line of numbers: "v1 v2 e1 e2", the firms' expected
// values and their equilibrium efforts in that state (the boundary needs
// only v1 v2). The cell finds a Nash equilibrium of the state from best
// responses in closed form (see equilibrium for which one when there are
// several).
func RDGame(left, below, diag []byte) ([]byte, error) {
	var in [3][2]float64
	for k, b := range [3][]byte{left, below, diag} {
		v, err := parseRDValue(b)
		if err != nil {
			return nil, fmt.Errorf("rdgame: %s input: %w", [3]string{"left", "below", "diagonal"}[k], err)
		}
		in[k] = v
	}
	l, b, d := in[0], in[1], in[2]
	// Firm f's continuation values: if it alone, the other alone, or both
	// advance.
	type prospects struct{ adv, other, both float64 }
	firm := [2]prospects{{l[0], b[0], d[0]}, {b[1], l[1], d[1]}}
	// value returns a firm's value when it exerts e against the other's o:
	// the fixed point of V = -c·e²/2 + β(Σ transitions), solved for V.
	value := func(p prospects, e, o float64) float64 {
		num := -RDGameCost*e*e/2 + RDGameDiscount*(e*o*p.both+e*(1-o)*p.adv+(1-e)*o*p.other)
		return num / (1 - RDGameDiscount*(1-e)*(1-o))
	}
	e := equilibrium(
		func(o float64) float64 { return bestResponse(firm[0].adv, firm[0].other, firm[0].both, o) },
		func(o float64) float64 { return bestResponse(firm[1].adv, firm[1].other, firm[1].both, o) },
	)
	v1, v2 := value(firm[0], e[0], e[1]), value(firm[1], e[1], e[0])
	out := make([]byte, 0, 96)
	for k, f := range [4]float64{v1, v2, e[0], e[1]} {
		if k > 0 {
			out = append(out, ' ')
		}
		out = strconv.AppendFloat(out, f, 'g', -1, 64)
	}
	return out, nil
}

// equilibrium returns efforts (e1, e2) with e1 = br1(e2) and e2 = br2(e1).
// It first iterates both best responses at once from (½, ½), damping the
// steps more each time the iteration does not settle; updating both firms
// together treats them alike, so mirrored states get mirrored equilibria.
// Where best responses keep cycling (several equilibria, as when the prize
// is large), it bisects e2 ↦ br2(br1(e2)) − e2, which is ≥ 0 at 0 and ≤ 0
// at 1 and continuous, so a fixed point is always found.
func equilibrium(br1, br2 func(float64) float64) [2]float64 {
	const tol = 1e-12
	for damp := 1.0; damp >= 1.0/64; damp /= 2 {
		e1, e2 := 0.5, 0.5
		for range 2000 {
			n1, n2 := br1(e2), br2(e1)
			if math.Abs(n1-e1) < tol && math.Abs(n2-e2) < tol {
				return [2]float64{n1, n2}
			}
			e1, e2 = e1+damp*(n1-e1), e2+damp*(n2-e2)
		}
	}
	lo, hi := 0.0, 1.0
	for hi-lo > 1e-15 {
		mid := (lo + hi) / 2
		if br2(br1(mid)) > mid {
			lo = mid
		} else {
			hi = mid
		}
	}
	e2 := (lo + hi) / 2
	return [2]float64{br1(e2), e2}
}

// bestResponse returns the effort in [0, 1] that maximises a firm's value
// V(e) = N(e)/D(e) against the other's effort o, where
// N(e) = -c·e²/2 + A·e + C0 and D(e) = D0 + D1·e (D > 0). V'(e) has the sign
// of g(e) = -(c·D1/2)·e² - c·D0·e + (A·D0 - C0·D1), which falls for e ≥ 0:
// V rises up to the positive root of g and falls after it, so that root,
// clamped to [0, 1], is the maximum.
func bestResponse(adv, other, both, o float64) float64 {
	const c, beta = RDGameCost, RDGameDiscount
	a := beta * (o*both + (1-o)*adv - o*other)
	c0 := beta * o * other
	d0, d1 := 1-beta*(1-o), beta*(1-o)
	k := a*d0 - c0*d1
	var e float64
	if d1 == 0 {
		e = k / (c * d0)
	} else if disc := c*c*d0*d0 + 2*c*d1*k; disc > 0 {
		e = (-c*d0 + math.Sqrt(disc)) / (c * d1)
	}
	return math.Min(math.Max(e, 0), 1)
}

// parseRDValue reads the two firms' values from "v1 v2 [e1 e2]".
func parseRDValue(b []byte) ([2]float64, error) {
	fields := bytes.Fields(b)
	if len(fields) != 2 && len(fields) != 4 {
		return [2]float64{}, fmt.Errorf("%q is not \"v1 v2\" or \"v1 v2 e1 e2\"", truncate(b, 40))
	}
	var v [2]float64
	for k := range v {
		f, err := strconv.ParseFloat(string(fields[k]), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return v, fmt.Errorf("%q is not a number", truncate(fields[k], 40))
		}
		v[k] = f
	}
	return v, nil
}
