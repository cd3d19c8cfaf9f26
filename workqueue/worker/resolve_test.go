package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUnresolvableMasterSaidOnce: a master whose host name does not
// resolve is said once at the default level, however often the worker
// retries it; every retry is at the debug level.
func TestUnresolvableMasterSaidOnce(t *testing.T) {
	var log bytes.Buffer
	cfg := Config{
		// .invalid never resolves (RFC 6761).
		Masters: []string{"no-such-master.invalid:9123", "other-master.invalid:9123"},
		Cores:   1, MemoryMB: 100, DiskMB: 1,
		Workdir:        t.TempDir(),
		ConnectTimeout: 50 * time.Millisecond,
		MinBackoff:     5 * time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "no master reachable") {
		t.Fatalf("Run = %v, want no master reachable", err)
	}
	var warned, retried []string
	for line := range strings.Lines(log.String()) {
		switch {
		case strings.Contains(line, "level=WARN"):
			warned = append(warned, line)
		case strings.Contains(line, `msg="no master"`):
			retried = append(retried, line)
		}
	}
	if len(retried) < 2 {
		t.Fatalf("%d attempts, want several to show the warning is not repeated:\n%s", len(retried), log.String())
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "host=no-such-master.invalid") || !strings.Contains(warned[1], "host=other-master.invalid") ||
		!strings.Contains(warned[0], "does not resolve") {
		t.Errorf("warnings %q, want one for each host that does not resolve", warned)
	}
}

func TestDNSErrors(t *testing.T) {
	a := &net.DNSError{Name: "a.invalid", Err: "no such host", IsNotFound: true}
	b := &net.DNSError{Name: "b.invalid", Err: "server misbehaving", IsTemporary: true}
	dial := func(e error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: e} }
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"nil", nil, nil},
		{"refused", dial(errors.New("connection refused")), nil},
		{"one", dial(a), []string{"a.invalid"}},
		{"wrapped", fmt.Errorf("catalog %s: %w", "a.invalid:9097", dial(a)), []string{"a.invalid"}},
		{"joined", errors.Join(dial(a), dial(errors.New("connection refused")), dial(b)), []string{"a.invalid", "b.invalid"}},
		{"repeated", errors.Join(dial(a), fmt.Errorf("again: %w", dial(a))), []string{"a.invalid"}},
	} {
		var got []string
		for _, e := range dnsErrors(tc.err) {
			got = append(got, e.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: dnsErrors(%v) names %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}
