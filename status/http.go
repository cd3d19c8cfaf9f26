package status

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed page.html
var pageHTML string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"percent": func(s Snapshot) string {
		if s.Total <= 0 {
			return "0"
		}
		return fmt.Sprintf("%.1f", 100*float64(s.Done)/float64(s.Total))
	},
	"seconds": seconds,
}).Parse(pageHTML))

// seconds writes a duration for a person: "42 s", "3m20s", "—" for
// unknown (negative).
func seconds(s float64) string {
	switch {
	case s < 0:
		return "—"
	case s < 100:
		return fmt.Sprintf("%.0f s", s)
	}
	return (time.Duration(s) * time.Second).String()
}

// Handler serves t: the page at /, its data at /status (JSON), Prometheus
// metrics at /metrics and the progress picture, if any, at /picture.png.
func Handler(t *Tracker) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		page.Execute(w, t.Snapshot())
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(t.Snapshot())
	})
	mux.HandleFunc("GET /picture.png", func(w http.ResponseWriter, r *http.Request) {
		t.mu.Lock()
		draw := t.picture
		t.mu.Unlock()
		if draw == nil {
			http.NotFound(w, r)
			return
		}
		b, err := draw()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(b)
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{t})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// A Server serves a tracker until closed.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Serve serves t at addr: ":PORT" (or "PORT") listens on the loopback
// interface only, since the page shows what runs and where; "HOST:PORT"
// listens where it says (":0" picks a free port).
func Serve(addr string, t *Tracker) (*Server, error) {
	hostPort, err := ListenAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", hostPort)
	if err != nil {
		return nil, fmt.Errorf("status page: %w", err)
	}
	s := &Server{
		srv:  &http.Server{Handler: Handler(t), ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return s, nil
}

// ListenAddr returns the address Serve listens on for addr — ":PORT" or
// "PORT" on the loopback interface, "HOST:PORT" as it says — or an error
// saying what is wrong with it, so that a command can refuse a bad
// --http before it starts its run.
func ListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// A bare port.
		host, port = "", addr
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("%q: not an address: give :PORT, or HOST:PORT", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// URL is the page's address.
func (s *Server) URL() string {
	return "http://" + s.addr.String() + "/"
}

// Close stops serving, letting requests under way finish for up to a
// second.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	return err
}

// collector turns a tracker's snapshot into metrics at each scrape.
type collector struct{ t *Tracker }

var (
	labels      = []string{"tool", "unit"}
	descTotal   = prometheus.NewDesc("rightsize_units", "Units of work in the run (rules, cells).", labels, nil)
	descDone    = prometheus.NewDesc("rightsize_units_done", "Units of work done.", labels, nil)
	descRunning = prometheus.NewDesc("rightsize_units_running", "Units of work running.", labels, nil)
	descFailed  = prometheus.NewDesc("rightsize_units_failed", "Units of work failed for good.", labels, nil)
	descRate    = prometheus.NewDesc("rightsize_rate", "Units done per second, recently.", labels, nil)
	descElapsed = prometheus.NewDesc("rightsize_elapsed_seconds", "Seconds since the run started.", labels, nil)
	descPredict = prometheus.NewDesc("rightsize_predicted_seconds", "The placement model's prediction of the run's time.", labels, nil)
	descWorkers = prometheus.NewDesc("rightsize_workers", "Workers (or this machine) taking the run's work.", labels, nil)
	descCores   = prometheus.NewDesc("rightsize_worker_cores", "Cores of the workers taking the run's work.", labels, nil)
	descEnded   = prometheus.NewDesc("rightsize_finished", "1 once the run has ended.", labels, nil)
	descCap     = prometheus.NewDesc("rightsize_capacity_workers", "Workers the Work Queue master could keep busy, from its recent tasks (0: not known).", labels, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTotal, descDone, descRunning, descFailed, descRate, descElapsed, descPredict, descWorkers, descCores, descEnded, descCap} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.t.Snapshot()
	var cores float64
	workers := 0
	for _, w := range s.Workers {
		cores += w.Cores
		workers += max(w.Count, 1)
	}
	finished := 0.0
	if s.Finished {
		finished = 1
	}
	for _, m := range []struct {
		d *prometheus.Desc
		v float64
	}{
		{descTotal, float64(s.Total)}, {descDone, float64(s.Done)}, {descRunning, float64(s.Running)},
		{descFailed, float64(s.Failed)}, {descRate, s.Rate}, {descElapsed, s.Elapsed}, {descPredict, s.Predicted},
		{descWorkers, float64(workers)}, {descCores, cores}, {descEnded, finished}, {descCap, s.Capacity},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.GaugeValue, m.v, s.Tool, s.Unit)
	}
}
