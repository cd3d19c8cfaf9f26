package model

import (
	"path/filepath"
	"runtime"
	"testing"
)

func TestProbe(t *testing.T) {
	m, err := Probe(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m.Cores != runtime.NumCPU() || m.MemoryMB <= 0 || m.DiskMB <= 0 || m.CacheBytes <= 0 {
		t.Errorf("Probe = %+v", m)
	}
	if m, err := Probe(""); err != nil || m.DiskMB != 0 || m.Cores == 0 {
		t.Errorf("Probe without a directory = %+v, %v", m, err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	if m, err := Probe(missing); err == nil || m.Cores == 0 {
		t.Errorf("Probe(%s) = %+v, %v; want the machine and an error", missing, m, err)
	}
}
