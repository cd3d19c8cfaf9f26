package distcmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/wire"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// An OwnWorker is this machine's cores as one more worker of a Work Queue
// master in this process, for a hybrid run. It takes no more tasks once
// another worker connects from this machine: that worker already runs on
// these cores, and two would share them at half speed each.
type OwnWorker struct {
	tool    string
	msgs    io.Writer
	log     *slog.Logger
	feature string        // announced by this worker only: how the master's hook knows it
	local   chan struct{} // closed once another worker joins from here: the worker drains
	here    func(net.IP) bool
	cores   int
}

// NewOwnWorker returns this machine's worker for a master that cfg will
// configure; its Joined hook (set here) watches the workers joining. Call
// Start once the master listens.
func NewOwnWorker(cfg *workqueue.Config, tool string, msgs io.Writer, log *slog.Logger) *OwnWorker {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	w := &OwnWorker{
		tool: tool, msgs: msgs, log: log,
		feature: "rightsize-own-worker-" + hex.EncodeToString(nonce),
		local:   make(chan struct{}),
		here:    distmaster.OnThisMachine(),
		cores:   runtime.NumCPU(),
	}
	onJoin(cfg, w.joined)
	return w
}

// joined is the master's hook: it notes a worker that is not this one
// and connects from this machine.
func (w *OwnWorker) joined(info workqueue.WorkerInfo) {
	if slices.Contains(info.Features, w.feature) {
		return
	}
	tcp, ok := info.Addr.(*net.TCPAddr)
	if !ok || !w.here(tcp.IP) {
		return
	}
	select {
	case <-w.local:
	default:
		close(w.local)
	}
}

// Start connects the worker to the master listening on port with cfg's
// password and TLS, and returns the function that stops it. inProcess, if
// not nil, does in this process the jobs whose work the master has at hand
// (worker.Config.InProcess). Once a worker
// joins from this machine it finishes the tasks it holds and takes no
// more.
func (w *OwnWorker) Start(port int, cfg workqueue.Config, inProcess func(*wire.TaskSpec) func(context.Context, string) error) (stop func(), err error) {
	wcfg := worker.Config{
		InProcess:  inProcess,
		Masters:    []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port))},
		Cores:      float64(w.cores),
		Password:   cfg.Password,
		MinBackoff: 100 * time.Millisecond,
		Features:   []string{w.feature},
		Drain:      w.local,
		Logger:     w.log,
	}
	if cfg.TLS != nil {
		tc, err := wire.ClientTLS("")
		if err != nil {
			return nil, err
		}
		wcfg.TLS = tc
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := worker.Run(ctx, wcfg); err != nil && ctx.Err() == nil {
			fmt.Fprintf(w.msgs, "%s: warning: this machine's worker stopped: %v\n", w.tool, err)
		}
	}()
	go func() {
		select {
		case <-w.local:
			fmt.Fprintf(w.msgs, "%s: a worker joined from this machine: its cores are this machine's, so the master's own worker takes no more tasks\n", w.tool)
		case <-done:
		}
	}()
	fmt.Fprintf(w.msgs, "%s: this machine's %d cores take tasks too, as a worker of this master\n", w.tool, w.cores)
	return func() { cancel(); <-done }, nil
}
