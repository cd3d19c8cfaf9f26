package model

import (
	"strings"
	"testing"
)

func TestParseMemAvailable(t *testing.T) {
	in := "MemTotal:       24000000 kB\nMemFree:        1000 kB\nMemAvailable:   20000000 kB\n"
	got, err := parseMemAvailable(strings.NewReader(in))
	if err != nil || got != 20000000<<10 {
		t.Errorf("parseMemAvailable = %d, %v; want %d", got, err, int64(20000000)<<10)
	}
	if _, err := parseMemAvailable(strings.NewReader("MemTotal: 5 kB\n")); err == nil {
		t.Error("no MemAvailable line: no error")
	}
}

func TestAllPairsBlockSize(t *testing.T) {
	mb := int64(1 << 20)
	tests := []struct {
		name  string
		mem   int64
		sizes []int64
		want  int
	}{
		{"all fit", 100 * mb, []int64{mb, mb, mb}, 3},
		{"half of memory", 10 * mb, []int64{2 * mb, 2 * mb, 2 * mb, 2 * mb}, 2},
		{"at least one", mb, []int64{8 * mb, 8 * mb}, 1},
		{"empty set", mb, nil, 0},
	}
	for _, tt := range tests {
		if got := AllPairsBlockSize(tt.mem, tt.sizes); got != tt.want {
			t.Errorf("%s: AllPairsBlockSize = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestMemAvailableHere(t *testing.T) {
	m, err := MemAvailable()
	if err != nil {
		t.Skipf("no /proc/meminfo here: %v", err)
	}
	if m <= 0 {
		t.Errorf("MemAvailable = %d", m)
	}
}

func TestParseCacheSize(t *testing.T) {
	for in, want := range map[string]int64{"32768K\n": 32 << 20, "1M": 1 << 20, "512": 512, "lots": 0, "-1K": 0} {
		if got := parseCacheSize(in); got != want {
			t.Errorf("parseCacheSize(%q) = %d, want %d", in, got, want)
		}
	}
	if CacheBytes() <= 0 {
		t.Error("CacheBytes() <= 0")
	}
}
