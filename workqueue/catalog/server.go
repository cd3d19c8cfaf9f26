package catalog

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServerConfig configures a catalog server. Zero values mean defaults.
type ServerConfig struct {
	// Addr is where to listen: host:port, with UDP updates and HTTP on port
	// and TCP updates on port+1. Port 0 picks free ports. Default
	// ":9097".
	Addr string
	// Lifetime is how long a record lives without an update (default 30
	// minutes); a record's own "lifetime" field may shorten it.
	Lifetime time.Duration
	// Logger receives the server's log (default: discarded).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// maxUpdate bounds one update (CCTools sends a few KB).
const maxUpdate = 1 << 20

// Server is a running catalog server.
type Server struct {
	cfg  ServerConfig
	log  *slog.Logger
	http net.Listener
	udp  net.PacketConn
	tcp  net.Listener
	srv  *http.Server

	mu      sync.Mutex
	records map[string]Record
	expires map[string]time.Time
}

// Listen opens the server's sockets. Call Serve to run it.
func Listen(cfg ServerConfig) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = ":" + strconv.Itoa(DefaultPort)
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 30 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, records: map[string]Record{}, expires: map[string]time.Time{}}
	// With port 0 the three sockets must still sit on p and p+1: retry
	// until a free pair turns up.
	for attempt := 0; ; attempt++ {
		err = s.open(host, port)
		if err == nil || port != "0" || attempt == 20 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveHTTP)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	return s, nil
}

func (s *Server) open(host, port string) error {
	h, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	p := h.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(p)))
	if err != nil {
		h.Close()
		return err
	}
	t, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p+1)))
	if err != nil {
		h.Close()
		u.Close()
		return err
	}
	s.http, s.udp, s.tcp = h, u, t
	return nil
}

// Port is the port the server listens on (UDP and HTTP; TCP updates go to
// Port+1).
func (s *Server) Port() int { return s.http.Addr().(*net.TCPAddr).Port }

// Serve runs the server until ctx is cancelled.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 3)
	go func() { errc <- s.srv.Serve(s.http) }()
	go func() { errc <- s.serveUDP() }()
	go func() { errc <- s.serveTCP() }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		s.close()
		return err
	}
	s.close()
	return nil
}

func (s *Server) close() {
	s.srv.Close()
	s.udp.Close()
	s.tcp.Close()
}

func (s *Server) serveUDP() error {
	buf := make([]byte, 65536)
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.update(buf[:n], from)
	}
}

func (s *Server) serveTCP() error {
	for {
		conn, err := s.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			body, err := io.ReadAll(io.LimitReader(conn, maxUpdate+1))
			if err != nil || len(body) > maxUpdate {
				s.log.Warn("catalog: bad TCP update", "from", conn.RemoteAddr(), "err", err, "bytes", len(body))
				return
			}
			s.update(body, conn.RemoteAddr())
		}()
	}
}

// update stores one update: JSON, zlib-compressed JSON (first byte 0x1A, as
// CCTools compresses) or the legacy "name value" lines.
func (s *Server) update(body []byte, from net.Addr) {
	rec, err := decodeUpdate(body)
	if err != nil {
		s.log.Warn("catalog: rejected update", "from", from, "err", err)
		return
	}
	host := from.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	now := s.cfg.Now()
	rec["address"] = host
	rec["lastheardfrom"] = float64(now.Unix())
	if rec.String("name") == "" {
		rec["name"] = host
	}
	life := s.cfg.Lifetime
	if l := rec.Float("lifetime"); l > 0 && time.Duration(l*float64(time.Second)) < life {
		life = time.Duration(l * float64(time.Second))
	}
	key := host + ":" + rec.String("port") + ":" + rec.String("name")
	if u := rec.String("uuid"); u != "" {
		key += ":" + u
	}
	s.mu.Lock()
	s.records[key] = rec
	s.expires[key] = now.Add(life)
	s.mu.Unlock()
}

func decodeUpdate(body []byte) (Record, error) {
	if len(body) > 0 && body[0] == 0x1A {
		zr, err := zlib.NewReader(bytes.NewReader(body[1:]))
		if err != nil {
			return nil, err
		}
		body, err = io.ReadAll(io.LimitReader(zr, maxUpdate+1))
		if err != nil {
			return nil, err
		}
		if len(body) > maxUpdate {
			return nil, errors.New("update too large")
		}
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errors.New("empty update")
	}
	rec := Record{}
	if body[0] == '{' {
		if err := json.Unmarshal(body, &rec); err != nil {
			return nil, err
		}
		return rec, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		if name == "" {
			continue
		}
		if f, err := strconv.ParseFloat(value, 64); err == nil {
			rec[name] = f
		} else {
			rec[name] = value
		}
	}
	if len(rec) == 0 {
		return nil, errors.New("no fields in update")
	}
	return rec, nil
}

// Records returns the live records, expiring old ones.
func (s *Server) Records() []Record {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.records))
	for k := range s.records {
		if now.After(s.expires[k]) {
			delete(s.records, k)
			delete(s.expires, k)
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Record, len(keys))
	for i, k := range keys {
		out[i] = s.records[k]
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	var filter *Filter
	switch {
	case path == "/query.json":
		filter, _ = ParseFilter("")
	case strings.HasPrefix(path, "/query/"):
		src := strings.TrimPrefix(path, "/query/")
		if len(src) > 8192 {
			http.Error(w, "filter too long", http.StatusBadRequest)
			return
		}
		expr, err := base64.StdEncoding.DecodeString(src)
		if err != nil {
			expr, err = base64.URLEncoding.DecodeString(src)
		}
		if err != nil {
			http.Error(w, "filter is not base64", http.StatusBadRequest)
			return
		}
		if filter, err = ParseFilter(string(expr)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	case path == "/":
		s.serveIndex(w)
		return
	default:
		http.NotFound(w, r)
		return
	}
	var out []Record
	for _, rec := range s.Records() {
		if filter.Match(rec) {
			out = append(out, rec)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	// One record per line inside the array, as CCTools writes it.
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, rec := range out {
		j, err := json.Marshal(rec)
		if err != nil {
			continue
		}
		b.Write(j)
		if i < len(out)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	w.Write(b.Bytes())
}

func (s *Server) serveIndex(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "%-20s %-24s %6s %8s %8s %9s %8s\n", "TYPE", "NAME", "PORT", "PROJECT", "WAITING", "RUNNING", "WORKERS")
	for _, r := range s.Records() {
		fmt.Fprintf(w, "%-20s %-24s %6s %8s %8d %9d %8d\n", r.String("type"), r.String("name"), r.String("port"),
			r.String("project"), r.Int("tasks_waiting"), r.Int("tasks_running"), r.Int("workers"))
	}
}
