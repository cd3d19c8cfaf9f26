package proc

import (
	"os"
	"syscall"
	"testing"
)

// BenchmarkSpawn starts and reaps /bin/true through Spawn and through
// syscall.ForkExec (what os.StartProcess uses), one process at a time and
// from GOMAXPROCS goroutines at once, and reports this process's own CPU
// time per process (children excluded).
func BenchmarkSpawn(b *testing.B) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	attr := &SpawnAttr{Files: [3]*os.File{devnull, devnull, devnull}}
	argv := []string{"true"}
	for _, bc := range []struct {
		name  string
		start func() (int, error)
	}{
		{"posix_spawn", func() (int, error) { return Spawn("/bin/true", argv, attr) }},
		{"fork_exec", func() (int, error) { return forkExec("/bin/true", argv, attr) }},
	} {
		startAndReap := func(b *testing.B) {
			pid, err := bc.start()
			if err != nil {
				b.Error(err)
				return
			}
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
				b.Error(err)
			}
		}
		b.Run(bc.name, func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				startAndReap(b)
			}
		})
		b.Run(bc.name+"_parallel", func(b *testing.B) {
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					startAndReap(b)
				}
			})
		})
	}
}

// BenchmarkCmd starts and waits for /bin/true through Cmd, one at a time,
// with its standard error's tail kept (a pipe), as Makeflow's rules run,
// and reports this process's own CPU time per command: waited for by a
// goroutine of its own (Wait), and by a Loop, the next command starting
// when Exited has handed over the Result through a channel (as Makeflow's
// Local executor does). Its time per op is the latency from one exit to
// the next start as much as the process itself.
func BenchmarkCmd(b *testing.B) {
	var k Keeper
	defer k.Close()
	loop, err := NewLoop()
	if err != nil {
		b.Fatal(err)
	}
	defer loop.Close()
	results := make(chan *Result, 1)
	for _, bc := range []struct {
		name string
		loop *Loop
	}{{"wait", nil}, {"loop", loop}} {
		b.Run(bc.name, func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				c := &Cmd{Path: "/bin/true", Args: []string{"true"}, StderrTail: 2048, Keeper: &k, Loop: bc.loop}
				if bc.loop != nil {
					c.Exited = func(r *Result) { results <- r }
				}
				p, err := c.Start()
				if err != nil {
					b.Fatal(err)
				}
				var r *Result
				if bc.loop != nil {
					r = <-results
				} else {
					r = p.Wait()
				}
				if r.ExitCode != 0 {
					b.Fatalf("%+v", r)
				}
			}
		})
	}
}

// reportCPU starts measuring this process's CPU time (its children's
// excluded); the function it returns reports it per op.
func reportCPU(b *testing.B) func() {
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	return func() {
		var after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkSpawnKept starts and reaps /bin/true registered with a Keeper,
// marked (Spawn with the Slot, which registers it) and unmarked (Spawn,
// then Set: a program killed in between leaves it behind), with this
// process's environment (nil, as funcs' program runner gives) and with a
// given one of the same size (as Makeflow gives), and reports this
// process's own CPU time per process. The difference is the mark's cost.
func BenchmarkSpawnKept(b *testing.B) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	var k Keeper
	defer k.Close()
	for _, env := range []struct {
		name string
		env  []string
	}{{"environ", nil}, {"env", os.Environ()}} {
		for _, marked := range []bool{false, true} {
			name := env.name + "_unmarked"
			if marked {
				name = env.name + "_marked"
			}
			b.Run(name, func(b *testing.B) {
				defer reportCPU(b)()
				for b.Loop() {
					s, err := k.Reserve()
					if err != nil {
						b.Fatal(err)
					}
					attr := &SpawnAttr{Env: env.env, Files: [3]*os.File{devnull, devnull, devnull}}
					if marked {
						attr.Slot = s
					}
					pid, err := Spawn("/bin/true", []string{"true"}, attr)
					if err != nil {
						b.Fatal(err)
					}
					if !marked {
						s.Set(pid)
					}
					var ws syscall.WaitStatus
					if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
						b.Error(err)
					}
					s.Release()
				}
			})
		}
	}
}
