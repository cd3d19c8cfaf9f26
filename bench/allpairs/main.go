// Command allpairs-bench measures rightsize's All-Pairs engine on this
// machine against its floors, side by side in one run, and prints a
// Markdown table of times and ratios:
//
//   - fig34: seed 000's Fig. 3.4 — 1000×10 of 1 MB random files with the
//     byte-difference function as a Go built-in, a shared library and an
//     external program, in blocked order (the engine) and naive row order
//     (every cell reads both of its files). Floors: reading the bytes once
//     (in-memory kinds) and a bare fork/exec of a trivial program (external).
//   - overhead: 300×300 of 20 KB files with a program that does nothing,
//     through the allpairs command, against bare fork/exec loops in C and in
//     Go, with the share of the cores kept busy.
//
// It is run by bench/allpairs_bench.sh, which builds the C pieces.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/multicore"
)

func main() {
	dir := flag.String("dir", "bench/out/allpairs", "where to keep the generated data")
	lib := flag.String("lib", "", "the byte-difference shared library")
	prog := flag.String("prog", "", "the byte-difference program")
	noop := flag.String("noop", "", "a program that does nothing")
	forkloop := flag.String("forkloop", "", "the C fork/exec loop")
	allpairs := flag.String("allpairs", "bin/allpairs", "the allpairs command")
	which := flag.String("run", "fig34,overhead", "which benchmarks to run")
	kinds := flag.String("kinds", "builtin,lib,prog", "fig34's function kinds: the Go built-in, the shared library, the external program")
	flag.Parse()
	cores := runtime.NumCPU()
	fmt.Printf("cores: %d\n\n", cores)
	for _, name := range strings.Split(*which, ",") {
		switch name {
		case "fig34":
			fig34(*dir, *lib, *prog, *noop, *forkloop, strings.Split(*kinds, ","), cores)
		case "overhead":
			overhead(*dir, *noop, *forkloop, *allpairs, cores)
		default:
			log.Fatalf("unknown benchmark %q", name)
		}
	}
}

// makeFiles creates n random files of size bytes in dir, once.
func makeFiles(dir string, n, size int, seed uint64) []string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	buf := make([]byte, size)
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%05d", i))
		if st, err := os.Stat(paths[i]); err == nil && st.Size() == int64(size) {
			continue
		}
		for k := 0; k+8 <= len(buf); k += 8 {
			v := rng.Uint64()
			for b := 0; b < 8; b++ {
				buf[k+b] = byte(v >> (8 * b))
			}
		}
		if err := os.WriteFile(paths[i], buf, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	return paths
}

// measure times f, also returning the CPU time used by this process and its
// children, so that the share of busy cores can be reported.
func measure(f func()) (wall, cpu time.Duration) {
	before := cpuTime()
	start := time.Now()
	f()
	return time.Since(start), cpuTime() - before
}

func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

// readOnce reads every file once, on all cores: the floor for in-memory
// functions, which must at least see every byte.
func readOnce(paths []string, cores int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < cores; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for {
				i := int(next.Add(1)) - 1
				if i >= len(paths) {
					return
				}
				f, err := os.Open(paths[i])
				if err != nil {
					log.Fatal(err)
				}
				for {
					if n, err := f.Read(buf); n == 0 || err != nil {
						break
					}
				}
				f.Close()
			}
		}()
	}
	wg.Wait()
}

// blocked runs the engine and checks that every cell succeeded.
func blocked(f funcs.Pair, a, b []string, cores int) {
	var failed atomic.Int64
	ap := &multicore.AllPairs{A: a, B: b, Func: f, Cores: cores, Results: func(rs []multicore.CellResult) {
		for _, r := range rs {
			if r.Err != nil {
				failed.Add(1)
				log.Printf("cell (%d,%d): %v", r.I, r.J, r.Err)
			}
		}
	}}
	if err := ap.Run(context.Background()); err != nil || failed.Load() > 0 {
		log.Fatalf("engine: %v, %d cells failed", err, failed.Load())
	}
}

// naive walks the matrix row by row (one B item at a time, all of A), every
// cell reading both of its files, on all cores.
func naive(f funcs.Pair, a, b []string, cores int) {
	inMemory := f.Info().Kind.InMemory()
	load := func(p string) funcs.Input {
		if !inMemory {
			return funcs.Input{Path: p}
		}
		data, err := os.ReadFile(p)
		if err != nil {
			log.Fatal(err)
		}
		return funcs.Input{Path: p, Data: data}
	}
	for _, bp := range b {
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < cores; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(a) {
						return
					}
					if _, err := f.Call(context.Background(), load(a[i]), load(bp)); err != nil {
						log.Fatal(err)
					}
				}
			}()
		}
		wg.Wait()
	}
}

// computeOnly calls an in-memory function n times on two 1 MB buffers that
// stay in cache, on all cores: what the cells cost with no I/O at all.
func computeOnly(f funcs.Pair, n, cores int) {
	x, y := make([]byte, 1<<20), make([]byte, 1<<20)
	for i := range x {
		x[i], y[i] = byte(i*7), byte(i*13)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < cores; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := f.Call(context.Background(), funcs.Input{Data: x}, funcs.Input{Data: y}); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
}

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("%s %v: %v", name, args, err)
	}
}

func fig34(dir, lib, prog, noop, forkloop string, kinds []string, cores int) {
	log.Printf("fig34: generating 1010 files of 1 MB in %s (once)", dir)
	a := makeFiles(filepath.Join(dir, "fig34-A"), 1000, 1<<20, 1)
	b := makeFiles(filepath.Join(dir, "fig34-B"), 10, 1<<20, 2)
	all := append(append([]string{}, a...), b...)
	cells := len(a) * len(b)
	readOnce(all, cores) // warm the page cache: every configuration reads from memory

	floorRead, _ := measure(func() { readOnce(all, cores) })
	floorFork, _ := measure(func() { run(forkloop, fmt.Sprint(cells), fmt.Sprint(cores), noop) })

	reg := funcs.NewRegistry()
	fmt.Printf("### Fig. 3.4: 1000×10 of 1 MB random files, byte-difference function, %d cores\n\n", cores)
	fmt.Printf("Floors: reading the 1010 MB once %.3f s; %d bare fork/execs of a trivial program %.3f s.\n", floorRead.Seconds(), cells, floorFork.Seconds())
	fmt.Printf("Compute floor: the same %d calls of the in-memory function on two 1 MB buffers already in cache, on all cores.\n\n", cells)
	fmt.Println("| function | order | time (s) | floor | ratio to floor | compute floor (s) | ratio to compute floor |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, spec := range []struct{ kind, name, spec string }{
		{"builtin", "Go built-in", "builtin:bytediff"},
		{"lib", "shared library (.so)", lib},
		{"prog", "external program", prog},
	} {
		if !slices.Contains(kinds, spec.kind) {
			continue
		}
		f, err := reg.OpenPair(spec.spec, funcs.Options{})
		if err != nil {
			log.Fatal(err)
		}
		floor, floorName := floorRead, "read once"
		if !f.Info().Kind.InMemory() {
			floor, floorName = floorFork, "fork/exec"
		}
		compute := "–"
		var tc time.Duration
		if f.Info().Kind.InMemory() {
			tc, _ = measure(func() { computeOnly(f, cells, cores) })
			compute = fmt.Sprintf("%.3f", tc.Seconds())
		}
		ratio := func(t time.Duration) string {
			if tc == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f×", t.Seconds()/tc.Seconds())
		}
		tb, _ := measure(func() { blocked(f, a, b, cores) })
		tn, _ := measure(func() { naive(f, a, b, cores) })
		fmt.Printf("| %s | blocked | %.3f | %s | %.2f× | %s | %s |\n", spec.name, tb.Seconds(), floorName, tb.Seconds()/floor.Seconds(), compute, ratio(tb))
		fmt.Printf("| %s | naive rows | %.3f | %s | %.2f× | %s | %s |\n", spec.name, tn.Seconds(), floorName, tn.Seconds()/floor.Seconds(), compute, ratio(tn))
		f.Close()
	}
	fmt.Println()
}

func overhead(dir, noop, forkloop, allpairs string, cores int) {
	log.Printf("overhead: generating 300 files of 20 KB in %s (once)", dir)
	a := makeFiles(filepath.Join(dir, "overhead"), 300, 20<<10, 3)
	setDir := filepath.Dir(a[0])
	cells := len(a) * len(a)

	tC, cpuC := measure(func() { run(forkloop, fmt.Sprint(cells), fmt.Sprint(cores), noop, a[0], a[1]) })
	tGo, cpuGo := measure(func() { goForkLoop(cells, cores, noop, a[0], a[1]) })
	// --local: the engine on this machine's cores, not a placement that
	// may choose a cluster the machine has (SLURM, a Work Queue project).
	tAP, cpuAP := measure(func() { run(allpairs, "--local", "-q", "-o", "/dev/null", noop, setDir, setDir) })

	floor := min(tC, tGo)
	busy := func(wall, cpu time.Duration) float64 { return 100 * cpu.Seconds() / (wall.Seconds() * float64(cores)) }
	fmt.Printf("### Per-cell overhead: 300×300 of 20 KB files, a program that does nothing, %d cores\n\n", cores)
	fmt.Println("| what | time (s) | per cell (µs) | cores busy | ratio to the faster floor |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, wall, cpu time.Duration) {
		fmt.Printf("| %s | %.3f | %.0f | %.0f%% | %.2f× |\n", name, wall.Seconds(), 1e6*wall.Seconds()/float64(cells), busy(wall, cpu), wall.Seconds()/floor.Seconds())
	}
	row("bare fork/exec loop, C (fork+execv+wait)", tC, cpuC)
	row("bare fork/exec loop, Go (os.StartProcess+Wait)", tGo, cpuGo)
	row("allpairs --local "+filepath.Base(noop)+" A A -o /dev/null", tAP, cpuAP)
	fmt.Println()
}

// goForkLoop runs prog n times, p at a time, with os.StartProcess and
// standard output on /dev/null.
func goForkLoop(n, p int, prog string, args ...string) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer devnull.Close()
	argv := append([]string{prog}, args...)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < p; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				proc, err := os.StartProcess(prog, argv, &os.ProcAttr{Files: []*os.File{nil, devnull, devnull}})
				if err != nil {
					log.Fatal(err)
				}
				proc.Wait()
			}
		}()
	}
	wg.Wait()
}
