package workqueue

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// notices collects what a master reports on Config.Notices.
type notices chan slog.Record

func (n notices) Enabled(context.Context, slog.Level) bool      { return true }
func (n notices) Handle(_ context.Context, r slog.Record) error { n <- r; return nil }
func (n notices) WithAttrs([]slog.Attr) slog.Handler            { return n }
func (n notices) WithGroup(string) slog.Handler                 { return n }

// next waits for the next notice and returns it as "msg key=value ...".
func (n notices) next(t *testing.T) string {
	t.Helper()
	select {
	case r := <-n:
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		return b.String()
	case <-time.After(time.Minute):
		t.Fatal("no notice from the master")
		return ""
	}
}

// TestTLS: a master with a certificate serves workers over TLS, with the
// password exchange inside; workers without TLS, or that do not trust the
// master's certificate, are refused, and the master says so with their
// address.
func TestTLS(t *testing.T) {
	cert, key := testutil.SelfSignedCert(t, "master")
	other, _ := testutil.SelfSignedCert(t, "other")
	server, err := wire.ServerTLS(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := func(ca string) *tls.Config {
		c, err := wire.ClientTLS(ca)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pw := []byte("s3cret\n")
	cases := []struct {
		name       string
		tls        *tls.Config
		password   []byte
		wantNotice string // "" if the worker must get in
	}{
		{"trusted certificate", client(cert), pw, ""},
		{"any certificate, as CCTools --ssl", client(""), pw, ""},
		{"wrong password", client(cert), []byte("guess\n"), "wrong or missing password"},
		{"no TLS", nil, pw, "TLS handshake failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(notices, 10)
			m := startMaster(t, Config{TLS: server, Password: pw, Notices: slog.New(seen)})
			startWorker(t, m, worker.Config{TLS: tc.tls, Password: tc.password})
			if tc.wantNotice == "" {
				if r := runOne(t, m, "echo over TLS"); strings.TrimSpace(string(r.Output)) != "over TLS" {
					t.Errorf("task: %+v", r)
				}
				return
			}
			n := seen.next(t)
			if !strings.Contains(n, tc.wantNotice) || !strings.Contains(n, "from=127.0.0.1:") {
				t.Errorf("notice %q, want %q with the worker's address", n, tc.wantNotice)
			}
			if st := m.Stats(); st.WorkersJoined != 0 {
				t.Errorf("%d workers joined", st.WorkersJoined)
			}
		})
	}
	t.Run("untrusted certificate", func(t *testing.T) {
		m := startMaster(t, Config{TLS: server, Password: pw})
		err := worker.Run(context.Background(), worker.Config{
			Masters: []string{fmt.Sprintf("127.0.0.1:%d", m.Port())}, TLS: client(other), Password: pw,
			Cores: 1, MemoryMB: 100, DiskMB: 100, Workdir: t.TempDir(), ConnectTimeout: time.Millisecond,
			Logger: testutil.Logger(t)})
		if err == nil || !strings.Contains(err.Error(), "not trusted") {
			t.Errorf("worker that does not trust the master's certificate: %v", err)
		}
	})
}

// TestWorkerFindsTLSMasterThroughCatalog: a worker started with -M uses
// TLS with a master whose catalog record says "ssl", as CCTools' does.
func TestWorkerFindsTLSMasterThroughCatalog(t *testing.T) {
	cert, key := testutil.SelfSignedCert(t, "master")
	server, err := wire.ServerTLS(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat := testutil.StartCatalog(t)
	project := projectName(t)
	m := startMaster(t, Config{TLS: server, Project: project, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond})
	startWorker(t, m, worker.Config{Project: project, Catalogs: []string{cat}})
	if r := runOne(t, m, "echo found"); strings.TrimSpace(string(r.Output)) != "found" {
		t.Errorf("task: %+v", r)
	}
}
