// Command irisreport summarises an All-Pairs result of the biometrics demo:
// it reads lines "A<TAB>B<TAB>distance", tells genuine pairs (two captures of
// one person) from impostor pairs by the file names, and prints how well a
// distance threshold separates them.
//
// With -compare FILE it instead checks that FILE (another run over some of
// the same pairs) agrees with the result cell by cell.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

type pair struct{ a, b string }

func main() {
	compare := flag.String("compare", "", "only check that this result file agrees with the main one")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: irisreport [-compare FILE] RESULT\n")
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	cells, err := read(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	if *compare != "" {
		agree(cells, *compare)
		return
	}
	var genuine, impostor []float64
	for p, d := range cells {
		if p.a == p.b {
			continue // an item against itself
		}
		if subject(p.a) == subject(p.b) {
			genuine = append(genuine, d)
		} else {
			impostor = append(impostor, d)
		}
	}
	if len(genuine) == 0 || len(impostor) == 0 {
		log.Fatalf("%s: need both genuine and impostor pairs", flag.Arg(0))
	}
	fmt.Printf("  %d genuine pairs, mean distance %.0f bytes\n", len(genuine), mean(genuine))
	fmt.Printf("  %d impostor pairs, mean distance %.0f bytes\n", len(impostor), mean(impostor))
	t, errRate := bestThreshold(genuine, impostor)
	fmt.Printf("  threshold %.0f bytes: %.2f%% of pairs misclassified\n", t, 100*errRate)
}

// agree checks that every cell of the result file other has the same value
// in cells.
func agree(cells map[pair]float64, other string) {
	got, err := read(other)
	if err != nil {
		log.Fatal(err)
	}
	for p, d := range got {
		if want, ok := cells[p]; !ok || want != d {
			log.Fatalf("%s: cell %s × %s = %v, but the main result has %v", other, p.a, p.b, d, want)
		}
	}
	fmt.Printf("  it agrees with the built-in on all %d cells\n", len(got))
}

// read parses a result file; names are reduced to their base name so that
// directory and set-list runs compare.
func read(path string) (map[pair]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cells := map[pair]float64{}
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		s, err := r.ReadString('\n')
		if err == io.EOF && s == "" {
			break
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		fields := strings.Split(strings.TrimSuffix(s, "\n"), "\t")
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want A<TAB>B<TAB>result", path, line)
		}
		d, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		a, b := filepath.Base(fields[0]), filepath.Base(fields[1])
		if a > b {
			a, b = b, a
		}
		cells[pair{a, b}] = d
	}
	return cells, nil
}

func subject(name string) string { return strings.SplitN(name, "_", 2)[0] }

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// bestThreshold returns the distance threshold (accept if d <= t) with the
// fewest misclassified pairs, and that error rate.
func bestThreshold(genuine, impostor []float64) (float64, float64) {
	all := append(append([]float64{}, genuine...), impostor...)
	slices.Sort(all)
	slices.Sort(genuine)
	slices.Sort(impostor)
	best, bestErr := 0.0, 2.0
	for _, t := range all {
		falseReject := len(genuine) - upper(genuine, t)
		falseAccept := upper(impostor, t)
		e := float64(falseReject+falseAccept) / float64(len(all))
		if e < bestErr {
			best, bestErr = t, e
		}
	}
	return best, bestErr
}

// upper returns how many of the sorted xs are <= t.
func upper(xs []float64, t float64) int {
	i, _ := slices.BinarySearch(xs, t)
	for i < len(xs) && xs[i] <= t {
		i++
	}
	return i
}
