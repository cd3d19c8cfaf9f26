package model

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// defaultCacheBytes is assumed when the machine does not say.
const defaultCacheBytes = 8 << 20

// CacheBytes returns the size of this machine's largest processor cache (the
// last-level cache shared by the cores), read from Linux's sysfs, or 8 MiB if
// it cannot be read.
func CacheBytes() int64 {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	var best int64
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "size"))
		if err != nil {
			continue
		}
		if n := parseCacheSize(string(b)); n > best {
			best = n
		}
	}
	if best == 0 {
		return defaultCacheBytes
	}
	return best
}

// parseCacheSize parses sysfs sizes such as "32768K" or "1M"; it returns 0
// for anything else.
func parseCacheSize(s string) int64 {
	s = strings.TrimSpace(s)
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * mult
}
