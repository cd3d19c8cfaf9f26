package workqueue

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// TestPasswordCheckLoggedOncePerHost: a worker pool checks every ten
// minutes that a master holds the masters' password by running the
// password exchange and hanging up. The master logs the first check from
// each host at Info and the later ones at Debug: no warning, and no line
// above Debug every ten minutes for as long as the pool runs.
func TestPasswordCheckLoggedOncePerHost(t *testing.T) {
	pw := []byte("s3cret\n")
	for _, tt := range []struct {
		name     string
		from     []string // the checkers' addresses, in order
		wantInfo int
	}{
		{"one pool, three checks", []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, 1},
		{"two pools", []string{"127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2"}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log testutil.SyncBuffer
			m := startMaster(t, Config{Password: pw,
				Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			for _, from := range tt.from {
				checkPassword(t, m, from, pw)
			}
			const msg = "password checked"
			testutil.WaitFor(t, fmt.Sprintf("%d password checks logged", len(tt.from)), 10*time.Second, func() bool {
				return strings.Count(log.String(), msg) >= len(tt.from)
			})
			var info, debug int
			for _, line := range strings.Split(log.String(), "\n") {
				switch {
				case strings.Contains(line, "level=WARN"):
					t.Errorf("a password check logged a warning: %s", line)
				case strings.Contains(line, msg) && strings.Contains(line, "level=INFO"):
					info++
				case strings.Contains(line, msg) && strings.Contains(line, "level=DEBUG"):
					debug++
				}
			}
			if info != tt.wantInfo || debug != len(tt.from)-tt.wantInfo {
				t.Errorf("%d checks logged at Info and %d at Debug, want %d and %d", info, debug, tt.wantInfo, len(tt.from)-tt.wantInfo)
			}
		})
	}
}

// checkPassword runs the password exchange with m from the loopback
// address from, as a worker pool's check does, and hangs up.
func checkPassword(t *testing.T, m *Master, from string, pw []byte) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if err := wire.NewConn(conn, wire.Limits{}).AuthenticateClient(pw, nil); err != nil {
		t.Fatalf("password exchange from %s: %v", from, err)
	}
}
