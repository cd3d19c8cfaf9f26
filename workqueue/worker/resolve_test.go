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

	"github.com/rightsize/rightsize/workqueue/wire"
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
	if strings.Contains(log.String(), "no master yet") {
		t.Errorf("said 'no master yet' besides the names that do not resolve:\n%s", log.String())
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

// TestNotAcceptedSaidOnce: a worker given the port of something that is
// not a Work Queue master (an HTTP server), or of a master that wants a
// password it has not, says so once, retries less and less often, and
// gives up at the connect timeout as it does where nothing listens,
// rather than reconnecting every second for ever.
func TestNotAcceptedSaidOnce(t *testing.T) {
	for _, tc := range []struct {
		name, reply, warning, ending string
	}{
		{"HTTP server", "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
			"not a Work Queue master; retrying quietly", ": not a Work Queue master: bad message"},
		{"master with a password", string(wire.Auth{Method: "password"}.AppendTo(nil)),
			"the master requires a password; retrying quietly", ": the master requires a password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan int, 1)
			go func() {
				n := 0
				defer func() { accepted <- n }()
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					n++
					conn.Write([]byte(tc.reply))
					conn.Close()
				}
			}()
			var log bytes.Buffer
			cfg := Config{
				Masters: []string{ln.Addr().String()},
				Cores:   1, MemoryMB: 100, DiskMB: 1,
				Workdir:        t.TempDir(),
				ConnectTimeout: 200 * time.Millisecond,
				MinBackoff:     5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo})),
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = Run(ctx, cfg)
			ln.Close()
			n := <-accepted
			if want := "no master accepted the worker for 200ms: " + ln.Addr().String() + tc.ending; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Run = %v, want it to give up at the connect timeout with %q", err, want)
			}
			if n < 2 {
				t.Fatalf("%d connections, want several to show the warning is not repeated", n)
			}
			if got := strings.Count(log.String(), "level=WARN"); got != 1 || !strings.Contains(log.String(), `msg="`+tc.warning+`"`) {
				t.Errorf("%d warnings over %d connections, want one %q:\n%s", got, n, tc.warning, log.String())
			}
			if got := strings.Count(log.String(), "msg=connected"); got != 1 {
				t.Errorf("said connected %d times over %d connections, want once:\n%s", got, n, log.String())
			}
		})
	}
}

// TestNoMasterSaidOnce: a worker whose master does not answer (not
// started yet) says once, at the default level, that it waits and why.
func TestNoMasterSaidOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var log bytes.Buffer
	cfg := Config{
		Masters: []string{addr},
		Cores:   1, MemoryMB: 100, DiskMB: 1,
		Workdir:        t.TempDir(),
		ConnectTimeout: 50 * time.Millisecond,
		MinBackoff:     5 * time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "no master reachable") {
		t.Fatalf("Run = %v, want no master reachable", err)
	}
	if n := strings.Count(log.String(), `msg="no master"`); n < 2 {
		t.Fatalf("%d attempts, want several:\n%s", n, log.String())
	}
	said := 0
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, `msg="no master yet; retrying quietly"`) {
			said++
			if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "connection refused") {
				t.Errorf("said %q, want it at the default level with why", line)
			}
		}
	}
	if said != 1 {
		t.Errorf("said 'no master yet' %d times, want once:\n%s", said, log.String())
	}
}
