// Command irisgen writes a small biometrics-like data set for the All-Pairs
// demo: SUBJECTS people, CAPTURES templates each, SIZE bytes per template.
//
// A template is a string of 0/1 bytes, like an iris code. Each person has a
// random code; each capture of that person flips a random 10–35% of its bytes,
// as sensor noise would. Two captures of one person therefore differ in
// about 20–55% of their bytes, so a few genuine pairs look like impostors,, and two different people in about 50%.
// Files are named sSSS_cC.iris.
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
)

func main() {
	subjects := flag.Int("subjects", 50, "number of people")
	captures := flag.Int("captures", 4, "templates per person")
	size := flag.Int("size", 100_000, "bytes per template")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: irisgen [flags] DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	dir := flag.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(*seed, 0))
	code := make([]byte, *size)
	capture := make([]byte, *size)
	for s := 0; s < *subjects; s++ {
		for i := range code {
			code[i] = byte(rng.IntN(2))
		}
		for c := 0; c < *captures; c++ {
			copy(capture, code)
			noise := 0.10 + 0.25*rng.Float64()
			for i := range capture {
				if rng.Float64() < noise {
					capture[i] ^= 1
				}
			}
			name := filepath.Join(dir, fmt.Sprintf("s%03d_c%d.iris", s, c))
			if err := os.WriteFile(name, capture, 0o644); err != nil {
				log.Fatal(err)
			}
		}
	}
}
