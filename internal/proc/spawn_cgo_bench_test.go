//go:build cgo && linux

package proc

import (
	"os"
	"testing"
)

// BenchmarkMark is what marking a process adds to a spawn in this
// process: the strings given to posix_spawn (spawnStrings), built without
// a mark and with one, for this process's environment (nil) and a given
// one of the same size.
func BenchmarkMark(b *testing.B) {
	var k Keeper
	defer k.Close()
	s, err := k.Reserve()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Release()
	b.Logf("%d variables", len(os.Environ()))
	argv := []string{"/bin/true"}
	for _, env := range []struct {
		name string
		env  []string
	}{{"environ", nil}, {"env", os.Environ()}} {
		for _, slot := range []struct {
			name string
			slot Slot
		}{{"unmarked", Slot{}}, {"marked", s}} {
			b.Run(env.name+"_"+slot.name, func(b *testing.B) {
				attr := &SpawnAttr{Env: env.env, Slot: slot.slot}
				b.ReportAllocs()
				for b.Loop() {
					spawnStrings(argv[0], argv, attr)
				}
			})
		}
	}
}
