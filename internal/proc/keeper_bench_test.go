package proc

import "testing"

// BenchmarkSlot is what registering a process costs a caller: Reserve,
// Set and Release, from two goroutines at once.
func BenchmarkSlot(b *testing.B) {
	var k Keeper
	defer k.Close()
	if _, err := k.Reserve(); err != nil { // starts the keeper
		b.Fatal(err)
	}
	b.SetParallelism(1)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, err := k.Reserve()
			if err != nil {
				b.Error(err)
				return
			}
			s.Set(4194304)
			s.Release()
		}
	})
}
